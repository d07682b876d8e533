"""Deflated Hutchinson on dense float64 matrices: the exact part from a Lanczos run equals
the one from explicit products, and over 300 probe seeds the estimate, the CI, ‖A‖_F²,
Σ A_ii², the block traces and the remainder's own statistics are unbiased / cover."""

import numpy as np
import pytest
import torch

from villani.curvature import (
    DenseOperator,
    ShiftedOperator,
    deflation_from_lanczos,
    deflation_from_products,
    hutchinson,
    lanczos,
    top_eigenvalues,
)

from .cases import matrix_with_spectrum

SEEDS = range(300)
BLOCKS = {"head": slice(0, 20), "middle": (20, 55), "tail": range(55, 80)}


@pytest.fixture(scope="module")
def outliers():
    """dim 80: eigenvalues 60, −40, 30, 20, 15 over an indefinite bulk in [−2, 3] (most of
    ‖A‖_F² in five directions, as for a trained network's Hessian)."""
    eig = np.concatenate([[60.0, -40.0, 30.0, 20.0, 15.0], np.linspace(-2.0, 3.0, 75)])
    return matrix_with_spectrum(eig, seed=4)


@pytest.fixture(scope="module")
def deflation(outliers):
    """From a 12-step Lanczos run of seed 999 (independent of the Hutchinson seeds)."""
    return deflation_from_lanczos(top_eigenvalues(outliers, 5, num_steps=12, seed=999, keep_basis=True).lanczos)


@pytest.fixture(scope="module")
def runs(outliers, deflation):
    return [hutchinson(outliers, 12, seed=s, blocks=BLOCKS, batch_size=6, deflation=deflation) for s in SEEDS]


def _within(values, exact, k=4.0):
    values = np.asarray(values)
    se = values.std(ddof=1) / np.sqrt(values.size)
    return abs(values.mean() - exact) < k * se, values.mean(), se


def _remainder(A, deflation):
    Q = deflation.basis
    P = torch.eye(A.shape[0], dtype=A.dtype) - Q.T @ Q
    return P @ A @ P


def test_lanczos_relation_gives_the_exact_part_without_products(outliers):
    """deflation_from_lanczos (from T and the residual) = deflation_from_products (from AQ)."""
    res = lanczos(outliers, 15, seed=3, keep_basis=True)
    Q = res.basis
    for shift in (0.0, 0.7):
        a = deflation_from_lanczos(res, shift=shift)
        b = deflation_from_products(Q, Q @ outliers - shift * Q)
        assert a.trace == pytest.approx(b.trace, rel=1e-12)
        assert a.frob_sq == pytest.approx(b.frob_sq, rel=1e-12)
        torch.testing.assert_close(a.diagonal, b.diagonal, rtol=1e-9, atol=1e-11)
        assert float(a.diagonal.sum()) == pytest.approx(a.trace, rel=1e-12)
    # a top-k run of the shifted operator ∇²F = A + λI deflates A with shift = λ
    top = top_eigenvalues(ShiftedOperator(DenseOperator(outliers), 0.5), 5, num_steps=15, seed=3, keep_basis=True)
    c = deflation_from_lanczos(top.lanczos, shift=0.5)
    Qc = top.lanczos.basis
    d = deflation_from_products(Qc, Qc @ outliers)
    assert c.trace == pytest.approx(d.trace, rel=1e-10)
    torch.testing.assert_close(c.diagonal, d.diagonal, rtol=1e-9, atol=1e-11)


def test_lanczos_relation_holds_after_a_restart():
    """A breakdown (3 distinct eigenvalues) and a restart: β = 0 and the relation still holds."""
    A = matrix_with_spectrum([5.0] * 3 + [2.0] * 3 + [1.0] * 4, seed=0)
    top = top_eigenvalues(A, 2, num_steps=8, seed=1, keep_basis=True)
    assert top.lanczos.restarts >= 1
    Q = top.lanczos.basis
    a, b = deflation_from_lanczos(top.lanczos), deflation_from_products(Q, Q @ A)
    assert a.trace == pytest.approx(b.trace, rel=1e-10)
    torch.testing.assert_close(a.diagonal, b.diagonal, rtol=1e-8, atol=1e-10)


def test_from_lanczos_needs_the_basis(outliers):
    with pytest.raises(ValueError, match="keep_basis"):
        deflation_from_lanczos(lanczos(outliers, 5, seed=0))


def test_trace_is_unbiased_and_the_ci_covers(runs, outliers):
    tr = float(outliers.trace())
    ok, mean, se = _within([r.mean for r in runs], tr)
    assert ok, (mean, tr, se)
    covered = np.mean([r.ci95[0] <= tr <= r.ci95[1] for r in runs])
    assert 0.90 <= covered <= 0.999, covered
    r = runs[0]
    assert r.method == "deflated hutchinson" and r.deflation_rank == 12 and r.num_matvecs == 12


def test_by_products_are_unbiased_for_A_itself(runs, outliers):
    ok, mean, se = _within([r.frob_sq for r in runs], float(outliers.square().sum()))
    assert ok, ("frob_sq", mean, se)
    ok, mean, se = _within([r.diag_sq for r in runs], float(torch.diagonal(outliers).square().sum()))
    assert ok, ("diag_sq", mean, se)
    d = torch.diagonal(outliers)
    for name, index in (("head", slice(0, 20)), ("middle", slice(20, 55)), ("tail", slice(55, 80))):
        ok, mean, se = _within([r.block_means[name] for r in runs], float(d[index].sum()))
        assert ok, (name, mean, se)
    np.testing.assert_allclose(runs[0].block_samples.sum(axis=1), runs[0].samples, rtol=1e-12)


def test_remainder_statistics_predict_the_variance(runs, outliers, deflation):
    R = _remainder(outliers, deflation)
    rem_frob, rem_diag = float(R.square().sum()), float(torch.diagonal(R).square().sum())
    ok, mean, se = _within([r.remainder_frob_sq for r in runs], rem_frob)
    assert ok, ("remainder_frob_sq", mean, rem_frob, se)
    ok, mean, se = _within([r.remainder_diag_sq for r in runs], rem_diag)
    assert ok, ("remainder_diag_sq", mean, rem_diag, se)
    predicted = 2 * (rem_frob - rem_diag)
    pooled = np.concatenate([r.samples for r in runs])
    assert pooled.var(ddof=1) == pytest.approx(predicted, rel=0.1)
    assert np.mean([r.predicted_var for r in runs]) == pytest.approx(predicted, rel=0.1)
    # plain Hutchinson's variance on the same matrix is ≈ 48× larger here
    plain = 2 * (float(outliers.square().sum()) - float(torch.diagonal(outliers).square().sum()))
    assert plain > 30 * predicted
    assert np.mean([r.predicted_var_plain for r in runs]) == pytest.approx(plain, rel=0.1)


def test_deflating_the_whole_space_is_exact(outliers):
    """Q = all eigenvectors: P = 0, every sample is tr A, no spread."""
    _, X = torch.linalg.eigh(outliers)
    Q = X.T.contiguous()
    est = hutchinson(outliers, 3, seed=0, deflation=deflation_from_products(Q, Q @ outliers))
    np.testing.assert_allclose(est.samples, float(outliers.trace()), rtol=1e-10)
    assert est.remainder_frob_sq == pytest.approx(0.0, abs=1e-18)


def test_probes_are_the_plain_probes_projected(outliers, deflation):
    """Common random numbers: probe m is the same Rademacher vector, projected."""
    est = hutchinson(outliers, 4, seed=7, deflation=deflation)
    from villani.curvature.probes import rademacher_rows

    Y = deflation.project(rademacher_rows(4, 80, seed=7))
    np.testing.assert_allclose(est.samples, deflation.trace + ((Y @ outliers) * Y).sum(1).numpy(), rtol=1e-12)


def test_the_pipelines_scheme_is_unbiased(outliers):
    """Probe 0 of seed s starts the Lanczos run, probes 1, 2, … are the Hutchinson probes
    (independent of the basis): over 200 seeds the estimate is unbiased and the CI covers.
    Reusing probe 0 (first_probe=0) is refused: its remainder would be exactly 0."""
    tr = float(outliers.trace())
    means, covered = [], []
    for s in range(200):
        run = top_eigenvalues(outliers, 5, num_steps=10, seed=s, keep_basis=True).lanczos
        est = hutchinson(outliers, 8, seed=s, first_probe=1, deflation=deflation_from_lanczos(run))
        means.append(est.mean)
        covered.append(est.ci95[0] <= tr <= est.ci95[1])
    ok, mean, se = _within(means, tr)
    assert ok, (mean, tr, se)
    assert 0.90 <= np.mean(covered) <= 0.999
    run = top_eigenvalues(outliers, 5, num_steps=10, seed=3, keep_basis=True).lanczos
    with pytest.raises(ValueError, match="first_probe"):
        hutchinson(outliers, 8, seed=3, deflation=deflation_from_lanczos(run))
    from villani.curvature.probes import rademacher_rows

    plain = hutchinson(outliers, 3, seed=3, first_probe=1)
    V = rademacher_rows(4, 80, seed=3)[1:]
    np.testing.assert_allclose(plain.samples, ((V @ outliers) * V).sum(1).numpy(), rtol=1e-12)
