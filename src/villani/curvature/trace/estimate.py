r"""The record of a stochastic trace estimate: :class:`TraceEstimate` (Hutchinson, deflated
Hutchinson, Hutch++, and the doubly stochastic estimator's view of itself), frozen, with
its samples, and :func:`summarize_samples`, the t-based interval every estimator reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import sqrt

import numpy as np
from scipy import stats

__all__ = ["TraceEstimate", "summarize_samples"]


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
