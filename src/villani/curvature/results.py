r"""Frozen result records of the curvature estimators (never bare tuples).

- :class:`TraceEstimate` — Hutchinson / deflated Hutchinson / Hutch++ trace estimates
  with their samples.
- :class:`LanczosResult` — the tridiagonal :math:`T_m` (and optionally the basis).
- :class:`EigenResult` — Ritz values with their residual norms.
- :class:`SpectralDensity` — SLQ nodes/weights per start vector, a smoothed density,
  quantiles and moments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import sqrt

import numpy as np
from scipy import stats
from scipy.linalg import eigh_tridiagonal
from scipy.special import ndtr, ndtri
from torch import Tensor

__all__ = ["TraceEstimate", "LanczosResult", "EigenResult", "SpectralDensity", "summarize_samples"]


def summarize_samples(samples: np.ndarray) -> tuple[float, float, float, tuple[float, float]]:
    r"""Mean, sample std (ddof 1), standard error and t-based 95% CI of i.i.d. samples.

    .. math::
        \bar x \pm t_{0.975,\,M-1}\, s/\sqrt{M}

    With one sample the spread is unknown: std, stderr and the CI are NaN.
    """
    m = samples.size
    mean = float(samples.mean())
    if m < 2:
        nan = float("nan")
        return mean, nan, nan, (nan, nan)
    std = float(samples.std(ddof=1))
    stderr = std / sqrt(m)
    half = float(stats.t.ppf(0.975, m - 1)) * stderr
    return mean, std, stderr, (mean - half, mean + half)


@dataclass(frozen=True, eq=False)
class TraceEstimate:
    r"""A stochastic trace estimate :math:`\widehat{\operatorname{tr}} A` and its samples.

    Attributes:
        mean: the estimate (mean of ``samples``).
        std: sample standard deviation of one sample (ddof = 1).
        stderr: standard error of ``mean``: ``std / sqrt(M)``.
        ci95: t-based 95% confidence interval ``(lo, hi)`` for the trace.
        samples: all M per-probe samples (float64).
        num_matvecs: operator applications spent.
        frob_sq: unbiased :math:`\|A\|_F^2` from :math:`\mathbb{E}\|Av\|^2`, or None.
        frob_sq_samples: the :math:`\|Av_m\|^2`, or None.
        diag_sq: unbiased :math:`\sum_i A_{ii}^2` from cross-products of the probe
            diagonals (needs M ≥ 2), or None.
        block_names: names of the coordinate blocks, in order, or ``()``.
        block_samples: ``(M, n_blocks)`` per-probe block traces
            :math:`v_b^\top (Av)_b`, or None.
        block_means: ``{name: mean}`` of ``block_samples`` (empty without blocks).
        block_stderr: ``{name: stderr}`` of ``block_samples``.
        method: ``"hutchinson"``, ``"deflated hutchinson"`` or ``"hutch++"``.
        deflation_rank: k, the rank of the exactly computed part (0: plain Hutchinson).
        exact_part: :math:`\operatorname{tr}(Q^\top AQ)`, added to every sample of a
            deflated estimate (0 otherwise).
        remainder_frob_sq, remainder_diag_sq: unbiased :math:`\|PAP\|_F^2` and
            :math:`\sum_i (PAP)_{ii}^2` of the deflated remainder (None when not deflated).
        max_probes: the most probes the call could spend (= M without a CI target).
        target_half_width: the CI half-width asked for (None without a target).
    """

    mean: float
    std: float
    stderr: float
    ci95: tuple[float, float]
    samples: np.ndarray
    num_matvecs: int
    frob_sq: float | None = None
    frob_sq_samples: np.ndarray | None = None
    diag_sq: float | None = None
    block_names: tuple[str, ...] = ()
    block_samples: np.ndarray | None = None
    block_means: dict[str, float] = field(default_factory=dict)
    block_stderr: dict[str, float] = field(default_factory=dict)
    method: str = "hutchinson"
    deflation_rank: int = 0
    exact_part: float = 0.0
    remainder_frob_sq: float | None = None
    remainder_diag_sq: float | None = None
    max_probes: int | None = None
    target_half_width: float | None = None

    @property
    def num_probes(self) -> int:
        """Number of samples M."""
        return int(self.samples.size)

    @property
    def cv(self) -> float:
        """Coefficient of variation of one sample: ``std / |mean|``."""
        return self.std / abs(self.mean) if self.mean != 0 else float("inf")

    @property
    def cv_of_mean(self) -> float:
        """Coefficient of variation of the M-sample mean: ``stderr / |mean|``."""
        return self.stderr / abs(self.mean) if self.mean != 0 else float("inf")

    @property
    def predicted_var(self) -> float | None:
        r"""Single-sample variance of *this* estimator, estimated from the same products:
        :math:`2(\|PAP\|_F^2 - \sum_i (PAP)_{ii}^2)` when deflated, else
        :attr:`predicted_var_plain` (None when a term is missing)."""
        if self.deflation_rank:
            if self.remainder_frob_sq is None or self.remainder_diag_sq is None:
                return None
            return 2.0 * (self.remainder_frob_sq - self.remainder_diag_sq)
        return self.predicted_var_plain

    @property
    def predicted_var_plain(self) -> float | None:
        r"""Rademacher single-sample variance of *plain* Hutchinson,
        :math:`2(\|A\|_F^2 - \sum_i A_{ii}^2)`, from ``frob_sq`` and ``diag_sq``."""
        if self.frob_sq is None or self.diag_sq is None:
            return None
        return 2.0 * (self.frob_sq - self.diag_sq)


@dataclass(frozen=True, eq=False)
class LanczosResult:
    r"""Outcome of ``m`` Lanczos steps: :math:`A Q_m = Q_m T_m + \beta_m q_{m+1} e_m^\top`.

    Attributes:
        alphas: diagonal of :math:`T_m`, shape ``(m,)``, float64.
        betas: off-diagonal of :math:`T_m`, shape ``(m-1,)``, float64; an exact zero
            marks a restart after breakdown (an invariant subspace was found).
        beta_last: :math:`\beta_m`, the norm of the residual after the last step;
            the Ritz residual of eigenpair ``i`` is :math:`\beta_m |s_{m,i}|`.
        num_matvecs: operator applications spent (``m``).
        basis: the orthonormal Lanczos vectors ``(m, dim)`` if kept, else None.
        restarts: how many breakdowns were continued with a fresh random vector.
        breakdown: True when the run stopped early on an invariant subspace.
        start_seed: when the run started from the first Rademacher probe of a seed
            (``v0`` not given), that seed — so :func:`~villani.curvature.slq` can reuse the
            run as its first start vector; None for a caller-given ``v0``.
        residual: with the basis, the last unnormalised residual
            :math:`r = \beta_m q_{m+1}`, so that :math:`AQ_m = Q_mT_m + r e_m^\top`
            gives :math:`AQ_m` without further products (:func:`~villani.curvature.deflation_from_lanczos`).
    """

    alphas: np.ndarray
    betas: np.ndarray
    beta_last: float
    num_matvecs: int
    basis: Tensor | None = None
    restarts: int = 0
    breakdown: bool = False
    start_seed: int | None = None
    residual: Tensor | None = None

    @property
    def num_steps(self) -> int:
        """Number of steps m (the size of :math:`T_m`)."""
        return int(self.alphas.size)

    def tridiagonal(self) -> np.ndarray:
        """:math:`T_m` as a dense ``(m, m)`` float64 array."""
        return np.diag(self.alphas) + np.diag(self.betas, 1) + np.diag(self.betas, -1)

    def ritz(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigen-decomposition of :math:`T_m`: ascending Ritz values and eigenvectors (columns)."""
        if self.alphas.size == 1:
            return self.alphas.copy(), np.ones((1, 1))
        return eigh_tridiagonal(self.alphas, self.betas)

    def ritz_residuals(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Ascending Ritz values and their residual norms :math:`\|A y_i - \theta_i y_i\|
        = \beta_m |s_{m,i}|` (exact in exact arithmetic; valid with full
        re-orthogonalisation)."""
        theta, s = self.ritz()
        return theta, np.abs(self.beta_last * s[-1, :])


@dataclass(frozen=True, eq=False)
class EigenResult:
    """Extreme eigenvalue estimates with error bars.

    Attributes:
        values: Ritz values, largest first.
        residuals: Ritz residual norms; each ``values[i]`` is within ``residuals[i]``
            of an eigenvalue of the operator.
        num_matvecs: operator applications spent.
        vectors: Ritz vectors ``(k, dim)`` when requested, else None.
        lanczos: the Lanczos run the values come from (its :math:`T_m` is also a Gauss
            quadrature of the spectral measure at the start vector, see
            :func:`~villani.curvature.slq`'s ``first``).
    """

    values: np.ndarray
    residuals: np.ndarray
    num_matvecs: int
    vectors: Tensor | None = None
    lanczos: LanczosResult | None = None


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
