r"""The record of stochastic Lanczos quadrature: :class:`SpectralDensity` — nodes and weights
per start vector, the smoothed density, its distribution function and quantiles, moments,
and the quadrature's own bounds on the distribution function (``cdf_bounds``,
``quantile_interval``), frozen — and :func:`slq_num_starts`, how many start vectors a
tolerance in distribution-function units needs.

**How many starts.** The randomness of one start shrinks with the dimension. For a
Rademacher :math:`v` the start's spectral distribution function at t is
:math:`F_v(t) = v^\top\Pi_tv/n` (:math:`\Pi_t` the spectral projector onto eigenvalues
≤ t, :math:`\operatorname{tr}\Pi_t = nF(t)`), unbiased for F(t) with

.. math::
    \operatorname{Var}F_v(t) = \frac{2}{n^2}\Big(\|\Pi_t\|_F^2 - \sum_i(\Pi_t)_{ii}^2\Big)
    \le \frac{2F(t)(1-F(t))}{n},

because :math:`\|\Pi_t\|_F^2 = \operatorname{tr}\Pi_t` and
:math:`\sum_i(\Pi_t)_{ii}^2 \ge (\operatorname{tr}\Pi_t)^2/n`. The mean over p starts is
within :math:`z\sqrt{2q(1-q)/(np)}` of F at the q-quantile with probability ≈ the normal
one, so :func:`slq_num_starts` returns the fewest p that keep this under a tolerance in
distribution-function units: at n = 10⁸ one start's standard error at the median is
7·10⁻⁵, the same as four starts' at n = 2.5·10⁷ (the bound is tested on dense matrices
of growing n). What the starts
cannot fix is the quadrature's resolution (:meth:`SpectralDensity.cdf_bounds`, bounded
rigorously by the Chebyshev–Markov–Stieltjes inequalities):
:meth:`SpectralDensity.quantile_interval` reports both.

This module imports no torch: a job's budget of starts is counted before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, sqrt

import numpy as np
from scipy.special import ndtr, ndtri

__all__ = ["SpectralDensity", "slq_num_starts"]


def slq_num_starts(dim: int, cdf_tol: float, *, q: float = 0.5, confidence: float = 0.95) -> int:
    r"""The fewest SLQ starts p whose randomness moves the spectral distribution at the
    ``q``-quantile by at most ``cdf_tol`` with probability ≈ ``confidence``:
    :math:`p = \lceil 2z^2q(1-q)/(n\,\varepsilon^2)\rceil`, at least 1 (derivation in the
    module docstring).

    >>> slq_num_starts(10**8, 0.001), slq_num_starts(10**3, 0.01)
    (1, 20)
    """
    if not cdf_tol > 0:
        raise ValueError(f"cdf_tol must be positive, got {cdf_tol!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q!r}")
    z = float(ndtri(0.5 + confidence / 2.0))
    return max(1, ceil(2.0 * z * z * q * (1.0 - q) / (int(dim) * cdf_tol * cdf_tol)))


@dataclass(frozen=True, eq=False)
class SpectralDensity:
    r"""Stochastic Lanczos quadrature of the spectral measure
    :math:`\mu = \frac1n\sum_i \delta_{\lambda_i}`.

    For each unit start vector :math:`u_j = v_j/\|v_j\|` the Gauss quadrature
    :math:`\sum_k \tau_{jk}^2 \delta_{\theta_{jk}}` matches :math:`u_j^\top f(A) u_j`
    for every polynomial ``f`` of degree ≤ 2m−1; averaging over Rademacher starts
    gives an unbiased estimate of :math:`\operatorname{tr} f(A)/n`.

    Attributes:
        nodes: per start vector, the Ritz values :math:`\theta_{jk}` (ascending).
        weights: per start vector, :math:`\tau_{jk}^2` (first components squared; sum 1).
        trace_samples: per start vector, :math:`v_j^\top A v_j = n\,\alpha_1^{(j)}`,
            a free Hutchinson sample.
        dim: n, the operator dimension.
        num_matvecs: operator applications spent by the call (a reused run not counted).
        breakdown: True when some start's Krylov space became invariant (its quadrature
            is then exact; a reused run may have restarted, adding zero-weight nodes).
    """

    nodes: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    trace_samples: np.ndarray
    dim: int
    num_matvecs: int
    breakdown: bool = False

    @property
    def num_probes(self) -> int:
        """Number of start vectors."""
        return len(self.nodes)

    def pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """All nodes, sorted, with weights summing to 1 (each probe weighted equally)."""
        nodes = np.concatenate(self.nodes)
        weights = np.concatenate(self.weights) / self.num_probes
        order = np.argsort(nodes, kind="stable")
        return nodes[order], weights[order]

    def moment(self, p: int) -> float:
        r"""Estimate of :math:`\operatorname{tr} A^p = n \int t^p\,d\mu(t)` (exact per probe
        for p ≤ 2m−1)."""
        per_probe = [float(np.sum(w * t**p)) for t, w in zip(self.nodes, self.weights)]
        return self.dim * float(np.mean(per_probe))

    def density(self, grid, sigma: float) -> np.ndarray:
        r"""Gaussian-smoothed density on ``grid``:
        :math:`\phi_\sigma(t) = \sum_k w_k\, \mathcal{N}(t;\theta_k,\sigma^2)`.

        It integrates to 1. ``sigma`` is the kernel bandwidth: with m Lanczos steps the
        nodes resolve the spectrum only to about (λ_max − λ_min)/m, so a smaller
        ``sigma`` shows spikes at the nodes, not features of the spectrum.
        """
        if not sigma > 0:
            raise ValueError(f"sigma must be positive, got {sigma}")
        grid = np.asarray(grid, dtype=np.float64)
        nodes, weights = self.pooled()
        z = (grid[..., None] - nodes) / sigma
        return (np.exp(-0.5 * z * z) @ weights) / (sigma * sqrt(2.0 * np.pi))

    def cdf(self, t: float, sigma: float | None = None) -> float:
        """Spectral distribution function at ``t`` (of the smoothed measure if ``sigma``)."""
        nodes, weights = self.pooled()
        if sigma is None:
            return float(weights[nodes <= t].sum())
        return float(ndtr((t - nodes) / sigma) @ weights)

    def quantile(self, q: float, sigma: float | None = None) -> float:
        r"""The ``q``-quantile of the spectral measure (``q = 0.5``: :math:`\lambda_\text{median}`).

        Without ``sigma``: the smallest node whose cumulative quadrature weight reaches
        ``q``. With ``sigma``: the quantile of the Gaussian-smoothed measure (bisection).
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"q must lie in [0, 1], got {q}")
        nodes, weights = self.pooled()
        if sigma is None:
            cum = np.cumsum(weights)
            idx = int(np.searchsorted(cum, q * cum[-1] * (1 - 1e-12), side="left"))
            return float(nodes[min(idx, nodes.size - 1)])
        lo, hi = nodes[0] - 10 * sigma, nodes[-1] + 10 * sigma
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if self.cdf(mid, sigma) < q:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, abs(mid)):
                break
        return 0.5 * (lo + hi)

    def cdf_bounds(self, t: float) -> tuple[float, float]:
        r"""Bounds ``(lo, hi)`` on the start vectors' mean spectral distribution at ``t``
        that the quadrature itself guarantees (no randomness).

        Chebyshev–Markov–Stieltjes: for an m-node Gauss quadrature of a measure, the
        measure's distribution function at a node :math:`\theta_k` lies within the jump
        of the quadrature's there, :math:`\sum_{i<k} w_i \le \mu(-\infty,\theta_k) \le
        \mu(-\infty,\theta_k] \le \sum_{i\le k} w_i`. For :math:`\theta_k \le t <
        \theta_{k+1}` it follows that :math:`\sum_{i<k} w_i \le \mu(-\infty,t] \le
        \sum_{i\le k+1} w_i`. Averaged over the starts. Zero-weight nodes (later blocks of
        a restarted run) are not nodes of the start's quadrature and are skipped.
        """
        lo = hi = 0.0
        for nodes, weights in zip(self.nodes, self.weights):
            keep = weights > 0
            x, w = nodes[keep], weights[keep]
            cum = np.concatenate([[0.0], np.cumsum(w)])
            k = int(np.searchsorted(x, t, side="right"))  # nodes ≤ t
            lo += cum[max(k - 1, 0)]
            hi += min(cum[min(k + 1, x.size)], 1.0)
        return lo / self.num_probes, hi / self.num_probes

    def quantile_interval(self, q: float, confidence: float = 0.95) -> tuple[float, float]:
        r"""An interval for the ``q``-quantile of the spectral measure μ of the operator.

        Two errors: the quadrature's resolution, bounded rigorously by
        :meth:`cdf_bounds`, and the start vectors' randomness. For a Rademacher start
        :math:`v` and the spectral projector :math:`\Pi_t` (rank :math:`nF(t)`), the start's
        distribution function is :math:`F_v(t) = v^\top\Pi_t v/n` with mean :math:`F(t)`
        and variance :math:`2(\|\Pi_t\|_F^2 - \sum_i (\Pi_t)_{ii}^2)/n^2 \le 2F(1-F)/n`
        (:math:`\sum_i (\Pi_t)_{ii}^2 \ge (\operatorname{tr}\Pi_t)^2/n` by Cauchy–Schwarz),
        so the mean over p starts is within :math:`z\sqrt{2q(1-q)/(np)}` of F at the
        quantile with probability ≈ ``confidence`` (normal approximation,
        :func:`~villani.curvature.slq_num_starts`). The interval is every t at which
        ``q`` lies in ``[lo(t) − zσ, hi(t) + zσ]``: from the smallest node where the upper
        bound reaches ``q`` to the first node where the lower bound exceeds it (±inf
        when the nodes do not bound it).
        """
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must lie in (0, 1), got {q}")
        z = float(ndtri(0.5 + confidence / 2.0))
        sd = sqrt(2.0 * q * (1.0 - q) / (self.dim * self.num_probes))
        nodes = np.unique(np.concatenate([n[w > 0] for n, w in zip(self.nodes, self.weights)]))
        bounds = np.array([self.cdf_bounds(float(t)) for t in nodes])
        upper_ok = np.flatnonzero(bounds[:, 1] + z * sd >= q)
        lower_over = np.flatnonzero(bounds[:, 0] - z * sd > q)
        below = self.cdf_bounds(float(np.nextafter(nodes[0], -np.inf)))
        lo = -np.inf if below[1] + z * sd >= q else float(nodes[upper_ok[0]])
        hi = float(nodes[lower_over[0]]) if lower_over.size else np.inf
        return lo, hi

    @property
    def trace(self) -> float:
        """Mean of ``trace_samples`` (a Hutchinson estimate of tr A)."""
        return float(np.mean(self.trace_samples))
