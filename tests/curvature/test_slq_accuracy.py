"""How accurate SLQ's quantiles are, and how many starts and steps they need.

- The randomness of one Rademacher start: the start's spectral distribution at the
  median, vᵀΠv/n, has standard deviation ≤ √(2F(1−F)/n), shrinking like n^(-1/2), on
  dense matrices of growing n (what ``slq_num_starts`` rests on).
- The quadrature's resolution: ``cdf_bounds`` brackets each start's exact distribution
  (Chebyshev–Markov–Stieltjes), and ``quantile_interval`` covers the true quantile.
- ``top_eigenvalues(tol=…)`` stops as soon as the top-k relative residuals are under tol.
"""

import numpy as np
import pytest
import torch

from villani.curvature import slq, slq_num_starts, top_eigenvalues
from villani.curvature.probes import rademacher_rows

from .cases import matrix_with_spectrum


def _haar(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    Q, R = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    return Q * torch.sign(torch.diagonal(R))


def test_one_start_concentrates_like_one_over_sqrt_n():
    """std over 300 starts of F_v(t_median) = ‖X_Sᵀv‖²/n (X_S: eigenvectors of the lower half)."""
    stds = {}
    for n in (100, 400, 1600):
        X = _haar(n, seed=n)[:, : n // 2]  # spectral projector onto the lower half: F = 1/2
        V = rademacher_rows(300, n, seed=1)
        F = (V @ X).square().sum(dim=1).numpy() / n
        stds[n] = F.std(ddof=1)
        bound = np.sqrt(2 * 0.25 / n)
        assert abs(F.mean() - 0.5) < 4 * stds[n] / np.sqrt(300)
        assert stds[n] <= 1.1 * bound, (n, stds[n], bound)  # ≈ equal for Haar eigenvectors
        assert stds[n] >= 0.8 * bound
    assert stds[100] / stds[1600] == pytest.approx(4.0, rel=0.2)


def test_slq_num_starts_follows_the_bound():
    assert slq_num_starts(125_000_000, 0.0005) == 1
    assert slq_num_starts(1000, 0.01) == 20  # 2·1.96²·¼ / (10³·10⁻⁴) = 19.2
    assert slq_num_starts(4000, 0.01) == 5
    p = slq_num_starts(400, 0.02)
    assert np.sqrt(2 * 0.25 / (400 * p)) * 1.96 <= 0.02 < np.sqrt(2 * 0.25 / (400 * (p - 1))) * 1.96
    with pytest.raises(ValueError):
        slq_num_starts(100, 0.0)


@pytest.fixture(scope="module")
def spectrum():
    """dim 400: two outliers over an uneven bulk (many eigenvalues near 0, as a Hessian's)."""
    rng = np.random.default_rng(0)
    eig = np.concatenate([[40.0, 25.0], rng.standard_normal(398) ** 3])
    return matrix_with_spectrum(eig, seed=8), np.sort(eig)


def test_cdf_bounds_bracket_each_starts_exact_distribution(spectrum):
    A, eig = spectrum
    w, X = torch.linalg.eigh(A)
    for seed in range(5):
        dens = slq(A, 1, 12, seed=seed)
        v = rademacher_rows(1, 400, seed=seed)[0]
        mass = (X.T @ v).square().numpy() / 400  # the start's spectral measure
        nodes = dens.nodes[0]
        probes = np.concatenate([nodes, 0.5 * (nodes[1:] + nodes[:-1]), [nodes[0] - 1, nodes[-1] + 1]])
        for t in probes:
            lo, hi = dens.cdf_bounds(float(t))
            exact = float(mass[w.numpy() <= t].sum())
            assert lo - 1e-9 <= exact <= hi + 1e-9, (seed, t, lo, exact, hi)


def test_quantile_interval_covers_the_true_quantiles(spectrum):
    A, eig = spectrum
    for q in (0.5, 0.9):
        true_q = eig[int(np.ceil(q * eig.size)) - 1]
        hits, widths = [], []
        for seed in range(40):
            dens = slq(A, 1, 20, seed=seed)
            lo, hi = dens.quantile_interval(q)
            hits.append(lo <= true_q <= hi)
            widths.append(hi - lo)
            assert lo <= dens.quantile(q) <= hi
        assert np.mean(hits) >= 0.95, (q, np.mean(hits))
        assert np.median(widths) < 0.25 * (eig[-3] - eig[0])  # informative, not the whole bulk
    # more steps resolve the median better
    coarse = slq(A, 1, 8, seed=0).quantile_interval(0.5)
    fine = slq(A, 1, 40, seed=0).quantile_interval(0.5)
    assert fine[1] - fine[0] < coarse[1] - coarse[0]


def test_top_eigenvalues_stop_at_a_relative_residual(separated):
    A, eig = separated
    full = top_eigenvalues(A, 5, num_steps=60, seed=0)
    early = top_eigenvalues(A, 5, num_steps=60, seed=0, tol=1e-6, keep_basis=True)
    assert 5 <= early.num_matvecs < 60
    assert np.all(early.residuals <= 1e-6 * np.abs(early.values))
    np.testing.assert_allclose(early.values, eig[:5], rtol=2e-6)
    np.testing.assert_allclose(early.values, full.values, rtol=2e-6)
    # the kept basis and residual satisfy A Q = Q T + r e_mᵀ
    run = early.lanczos
    Q, T = run.basis, torch.as_tensor(run.tridiagonal())
    AQ = Q @ A
    expected = T @ Q
    expected[-1] += run.residual
    torch.testing.assert_close(AQ, expected, rtol=0, atol=1e-9)
    assert float(torch.linalg.vector_norm(run.residual)) == pytest.approx(run.beta_last, rel=1e-12)
    with pytest.raises(ValueError):
        top_eigenvalues(A, 5, num_steps=60, tol=0.0)
