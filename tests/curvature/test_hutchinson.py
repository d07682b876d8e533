"""Hutchinson trace estimation on dense matrices with known trace, norm and diagonal.

Statistical checks run over fixed seeds (deterministic), with tolerances of a few
standard errors of the across-seed mean: a biased or mis-scaled estimator fails them.
"""

import numpy as np
import pytest
import torch

from villani.curvature import DenseOperator, hutchinson

SEEDS = range(300)


@pytest.fixture(scope="module")
def runs(general_matrix):
    op = DenseOperator(general_matrix)
    blocks = {"head": slice(0, 10), "middle": (10, 45), "tail": range(45, 60)}
    return [hutchinson(op, 16, seed=s, blocks=blocks, batch_size=8) for s in SEEDS]


def _within(values, exact, k=4.0):
    values = np.asarray(values)
    se = values.std(ddof=1) / np.sqrt(values.size)
    return abs(values.mean() - exact) < k * se, values.mean(), se


def test_diagonal_matrix_is_exact():
    A = torch.diag(torch.linspace(-3.0, 7.0, 40, dtype=torch.float64))
    est = hutchinson(A, 5, seed=1)
    np.testing.assert_allclose(est.samples, float(A.trace()), rtol=1e-13)
    assert est.std == pytest.approx(0.0, abs=1e-10)


def test_trace_is_unbiased(runs, general_matrix):
    ok, mean, se = _within([r.mean for r in runs], float(general_matrix.trace()))
    assert ok, (mean, float(general_matrix.trace()), se)


def test_ci95_covers_the_trace_about_95_percent(runs, general_matrix):
    tr = float(general_matrix.trace())
    covered = np.mean([r.ci95[0] <= tr <= r.ci95[1] for r in runs])
    # binomial sd at n=300 is 0.0126; accept ±4 sd around 0.95
    assert 0.90 <= covered <= 0.999, covered


def test_ci_is_t_based_and_stderr_consistent(runs):
    from scipy import stats

    r = runs[0]
    assert r.stderr == pytest.approx(np.std(r.samples, ddof=1) / 4.0)
    half = stats.t.ppf(0.975, 15) * r.stderr
    assert r.ci95 == pytest.approx((r.mean - half, r.mean + half))
    assert r.cv == pytest.approx(r.std / abs(r.mean))
    assert r.cv_of_mean == pytest.approx(r.stderr / abs(r.mean))


def test_frob_sq_is_unbiased(runs, general_matrix):
    ok, mean, se = _within([r.frob_sq for r in runs], float(general_matrix.square().sum()))
    assert ok, (mean, se)


def test_diag_sq_is_unbiased(runs, general_matrix):
    ok, mean, se = _within([r.diag_sq for r in runs], float(torch.diagonal(general_matrix).square().sum()))
    assert ok, (mean, se)


def test_block_means_are_unbiased_and_sum_to_samples(runs, general_matrix):
    d = torch.diagonal(general_matrix)
    exact = {"head": float(d[:10].sum()), "middle": float(d[10:45].sum()), "tail": float(d[45:].sum())}
    for name, value in exact.items():
        ok, mean, se = _within([r.block_means[name] for r in runs], value)
        assert ok, (name, mean, value, se)
    r = runs[0]
    assert r.block_names == ("head", "middle", "tail")
    np.testing.assert_allclose(r.block_samples.sum(axis=1), r.samples, rtol=1e-12, atol=1e-10)


def test_rademacher_variance_formula(general_matrix):
    """Var(vᵀAv) = 2(‖A‖_F² − Σ A_ii²) for Rademacher v (Gaussian would give 2‖A‖_F²)."""
    A = general_matrix + torch.diag(torch.full((60,), 20.0, dtype=torch.float64))
    est = hutchinson(A, 4000, seed=11, batch_size=500)
    predicted = 2 * (float(A.square().sum()) - float(torch.diagonal(A).square().sum()))
    gaussian = 2 * float(A.square().sum())
    assert est.std**2 == pytest.approx(predicted, rel=0.1)
    assert abs(est.std**2 - gaussian) > 0.5 * gaussian
    assert est.predicted_var == pytest.approx(predicted, rel=0.1)


def test_blocks_accept_masks_and_index_tensors(general_matrix):
    mask = torch.zeros(60, dtype=torch.bool)
    mask[::2] = True
    est = hutchinson(general_matrix, 6, seed=0, blocks={"even": mask, "odd": torch.arange(1, 60, 2)})
    np.testing.assert_allclose(est.block_samples.sum(axis=1), est.samples, rtol=1e-12, atol=1e-10)
    with pytest.raises(ValueError):
        hutchinson(general_matrix, 2, blocks={"bad": slice(5, 5)})
    with pytest.raises(ValueError):
        hutchinson(general_matrix, 2, blocks={"bad": torch.tensor([0, 60])})


def test_seed_reproducible_and_batching_invariant(general_matrix):
    a = hutchinson(general_matrix, 10, seed=5)
    b = hutchinson(general_matrix, 10, seed=5, batch_size=4)
    c = hutchinson(general_matrix, 10, seed=6)
    np.testing.assert_allclose(a.samples, b.samples, rtol=1e-13)
    assert hutchinson(general_matrix, 10, seed=5).samples.tolist() == a.samples.tolist()
    assert a.samples.tolist() != c.samples.tolist()
    # a prefix of the probes is the same probes: common random numbers across runs
    assert hutchinson(general_matrix, 4, seed=5).samples.tolist() == a.samples[:4].tolist()


def test_single_probe_has_no_spread(general_matrix):
    est = hutchinson(general_matrix, 1, seed=0)
    assert est.num_matvecs == 1 and np.isnan(est.stderr) and est.diag_sq is None
    with pytest.raises(ValueError):
        hutchinson(general_matrix, 0)
