"""Stochastic Lanczos quadrature: moments, free trace samples, density, quantiles."""

import numpy as np
import pytest
import torch

from villani.curvature import hutchinson, slq

from .cases import matrix_with_spectrum


@pytest.fixture(scope="module")
def known():
    eig = np.concatenate([[40.0, 25.0], np.linspace(-2.0, 3.0, 148)])
    return matrix_with_spectrum(eig, seed=7), eig


def test_trace_samples_are_the_hutchinson_samples(known):
    A, _ = known
    dens = slq(A, 6, 20, seed=3)
    hut = hutchinson(A, 6, seed=3)
    np.testing.assert_allclose(dens.trace_samples, hut.samples, rtol=1e-10)
    assert dens.trace == pytest.approx(hut.mean, rel=1e-10)


def test_quadrature_moments_are_exact_per_probe(known):
    """Gauss quadrature with m nodes is exact for degree ≤ 2m−1: n Σ τ²θ² = ‖Av‖²."""
    A, _ = known
    dens = slq(A, 5, 10, seed=0)
    hut = hutchinson(A, 5, seed=0)
    assert dens.moment(0) == pytest.approx(A.shape[0], rel=1e-12)
    assert dens.moment(1) == pytest.approx(hut.mean, rel=1e-10)
    assert dens.moment(2) == pytest.approx(hut.frob_sq, rel=1e-10)


def test_moments_match_exact_spectrum(known):
    A, eig = known
    runs = [slq(A, 4, 15, seed=s) for s in range(60)]
    for p, exact in ((1, eig.sum()), (2, (eig**2).sum())):
        est = np.array([r.moment(p) for r in runs])
        se = est.std(ddof=1) / np.sqrt(est.size)
        assert abs(est.mean() - exact) < 4 * se, (p, est.mean(), exact, se)


def test_weights_sum_to_one_and_density_integrates_to_one(known):
    A, _ = known
    dens = slq(A, 3, 30, seed=1)
    for w in dens.weights:
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
    grid = np.linspace(-10, 50, 6001)
    phi = dens.density(grid, sigma=0.3)
    assert np.trapezoid(phi, grid) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError):
        dens.density(grid, sigma=0.0)


def test_density_matches_smoothed_spectrum(known):
    """With a bandwidth wider than the node spacing, SLQ ≈ the smoothed true density."""
    A, eig = known
    dens = slq(A, 20, 40, seed=2)
    grid = np.linspace(-6, 45, 2000)
    sigma = 1.0
    exact = np.exp(-0.5 * ((grid[:, None] - eig) / sigma) ** 2).sum(1) / (eig.size * sigma * np.sqrt(2 * np.pi))
    l1 = np.trapezoid(np.abs(dens.density(grid, sigma) - exact), grid)
    assert l1 < 0.07, l1


def test_outliers_are_nodes(known):
    A, _ = known
    dens = slq(A, 2, 40, seed=0)
    for nodes in dens.nodes:
        assert np.min(np.abs(nodes - 40.0)) < 1e-8 and np.min(np.abs(nodes - 25.0)) < 1e-8


def test_median_quantile(known):
    A, eig = known
    dens = slq(A, 30, 40, seed=4)
    exact = np.quantile(eig, 0.5)
    bulk_width = 5.0  # the median sits in the bulk [-2, 3]
    assert abs(dens.quantile(0.5) - exact) < 0.05 * bulk_width
    assert abs(dens.quantile(0.5, sigma=0.2) - exact) < 0.05 * bulk_width
    assert dens.quantile(0.0) == pytest.approx(dens.pooled()[0][0])
    assert dens.quantile(1.0) == pytest.approx(dens.pooled()[0][-1])
    assert dens.cdf(dens.quantile(0.3, sigma=0.2), sigma=0.2) == pytest.approx(0.3, abs=1e-8)
    with pytest.raises(ValueError):
        dens.quantile(1.5)


def test_slq_reproducible_and_counts_matvecs(known):
    A, _ = known
    a, b = slq(A, 3, 12, seed=5), slq(A, 3, 12, seed=5)
    assert all(x.tolist() == y.tolist() for x, y in zip(a.nodes, b.nodes))
    assert a.num_matvecs == 36 and a.num_probes == 3 and a.dim == 150


def test_slq_stops_on_breakdown():
    A = torch.diag(torch.tensor([1.0, 1.0, 2.0, 2.0, 3.0, 3.0], dtype=torch.float64))
    dens = slq(A, 2, 6, seed=0)
    assert all(n.size == 3 for n in dens.nodes)  # 3 distinct eigenvalues: Krylov dim 3
    np.testing.assert_allclose(np.sort(dens.nodes[0]), [1.0, 2.0, 3.0], rtol=1e-10)
    assert dens.moment(1) == pytest.approx(dens.trace, rel=1e-10)


def test_first_reuses_a_top_eigenvalues_run(known):
    """slq(first=top_eigenvalues(...).lanczos) equals slq whose start 0 runs that many
    steps: the top-k run from probe 0 is SLQ's first quadrature, its products not recounted."""
    from villani.curvature import top_eigenvalues

    A, eig = known
    top = top_eigenvalues(A, 2, num_steps=30, seed=4)
    np.testing.assert_allclose(top.values, np.sort(eig)[::-1][:2], rtol=1e-8)
    reused = slq(A, 3, 12, seed=4, first=top.lanczos)
    plain = slq(A, 1, 30, seed=4)
    rest = slq(A, 3, 12, seed=4)
    assert reused.nodes[0].tolist() == plain.nodes[0].tolist()
    assert reused.weights[0].tolist() == plain.weights[0].tolist()
    assert [n.tolist() for n in reused.nodes[1:]] == [n.tolist() for n in rest.nodes[1:]]
    assert reused.trace_samples.tolist() == rest.trace_samples.tolist()  # n·α₁ does not depend on steps
    assert reused.num_matvecs == 2 * 12 and top.num_matvecs == 30


def test_first_from_another_seed_is_refused(known):
    from villani.curvature import top_eigenvalues

    A, _ = known
    with pytest.raises(ValueError, match="seed 4"):
        slq(A, 2, 12, seed=5, first=top_eigenvalues(A, 1, num_steps=12, seed=4).lanczos)


def test_restarted_blocks_carry_zero_weight():
    """A top-k run that restarted after breakdown adds nodes of zero weight: the
    quadrature stays that of the start vector."""
    from villani.curvature import top_eigenvalues

    A = torch.diag(torch.tensor([1.0, 1.0, 2.0, 2.0, 3.0, 3.0], dtype=torch.float64))
    top = top_eigenvalues(A, 2, num_steps=6, seed=0)
    assert top.lanczos.restarts > 0
    dens = slq(A, 1, 6, seed=0, first=top.lanczos)
    plain = slq(A, 1, 6, seed=0)
    assert dens.nodes[0].size > plain.nodes[0].size  # the restarted blocks' nodes …
    assert dens.weights[0].sum() == pytest.approx(1.0)  # … carry no weight
    assert dens.moment(1) == pytest.approx(plain.moment(1), rel=1e-12)
    assert dens.moment(2) == pytest.approx(plain.moment(2), rel=1e-12)
    assert dens.breakdown
