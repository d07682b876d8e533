"""Statistics of trace samples and small fits (numpy and scipy only).

- :func:`sample_stats` — mean, std, standard error, t-based 95% CI, CV, Shapiro–Wilk p of
  a sample (the M Hutchinson samples of one checkpoint, or one value per seed);
- :func:`hutchinson_variance`, :func:`predicted_cv` — what the variance and CV of a
  Hutchinson estimate *should* be, from ‖A‖_F² (SPEC §5; the paper's eq. 57 and its
  √(2d/M) claim are wrong);
- :func:`fit_slope`, :func:`r_squared` — least-squares line (linear or log–log space),
  optionally over the largest x only (Fig 2's slope of Ψ_s vs ‖θ‖²), and R²;
- :func:`within_slope` — the slope of y on x *inside* clusters (runs), each cluster's means
  removed: an exponent at fixed λ (Fig 4's and Fig 8's ‖θ‖ exponents);
- :func:`fit_cost_model` — y ≈ a + b·x with a, b ≥ 0 in relative error (Fig 10's cost of
  one HVP vs model dimension);
- :func:`simpson_decomposition` — a pooled correlation split into its within- and
  between-strata parts (Fig 7 pooled over λ: Simpson's paradox);
- :func:`pearson_r`, :func:`spearman_rho` and the intervals of the claims ledger live in
  :mod:`villani.statistics.intervals` (each with a coverage test), their one home.

Undefined quantities (a std of one value, a CV of a zero mean) are ``None``, as in
:mod:`villani.bounds`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats as _sps

__all__ = [
    "SampleStats",
    "LinearFit",
    "sample_stats",
    "t_interval",
    "shapiro_p",
    "hutchinson_variance",
    "predicted_cv",
    "fit_slope",
    "r_squared",
    "within_slope",
    "CostFit",
    "fit_cost_model",
    "Simpson",
    "simpson_decomposition",
]


def _as_1d(samples: Any) -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("empty sample")
    if not np.all(np.isfinite(x)):
        raise ValueError("sample holds NaN or inf")
    return x


@dataclass(frozen=True)
class SampleStats:
    """Summary of a sample x₁ … x_n.

    - ``std``: sample standard deviation (ddof = 1) — the spread of *one* sample;
    - ``stderr`` = std/√n — the standard deviation of the *mean*;
    - ``ci95``: mean ± t₀.₉₇₅,ₙ₋₁ · stderr (Student t, exact for normal samples);
    - ``cv`` = ``std/|mean|`` — the CV of one sample (Fig 8 histograms, the paper's "CV");
    - ``rel_stderr`` = ``stderr/|mean|`` — the CV of the mean, i.e. the relative error of the
      estimate; compare it with :func:`predicted_cv` at ``num_probes = n``;
    - ``shapiro_p``: Shapiro–Wilk normality p-value (n >= 3 and not constant).

    ``None`` where undefined: std, stderr, ci95 for n = 1; cv, rel_stderr for mean = 0;
    shapiro_p for n < 3 or a constant sample.
    """

    n: int
    mean: float
    std: float | None
    stderr: float | None
    ci95: tuple[float, float] | None
    cv: float | None
    rel_stderr: float | None
    shapiro_p: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (``ci95`` as a two-element list or ``None``)."""
        out = asdict(self)
        out["ci95"] = None if self.ci95 is None else [self.ci95[0], self.ci95[1]]
        return out


def t_interval(samples: Any, confidence: float = 0.95) -> tuple[float, float] | None:
    r"""Student-t confidence interval for the mean: :math:`\bar x \pm t_{(1+c)/2,\,n-1}\, s/\sqrt n`.

    ``None`` for n = 1.

    >>> lo, hi = t_interval([1.0, 2.0, 3.0])    # 2 ± 4.302653 · 1/√3
    >>> round(lo, 6), round(hi, 6)
    (-0.484138, 4.484138)
    """
    x = _as_1d(samples)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if x.size < 2:
        return None
    mean, se = float(x.mean()), float(x.std(ddof=1)) / math.sqrt(x.size)
    if se == 0.0:  # a constant sample: scipy's interval of scale 0 is NaN
        return (mean, mean)
    lo, hi = _sps.t.interval(confidence, x.size - 1, loc=mean, scale=se)
    return (float(lo), float(hi))


def shapiro_p(samples: Any) -> float | None:
    """Shapiro–Wilk p-value (scipy); ``None`` for n < 3 or a constant sample."""
    x = _as_1d(samples)
    if x.size < 3 or float(np.ptp(x)) == 0.0:
        return None
    return float(_sps.shapiro(x).pvalue)


def sample_stats(samples: Any) -> SampleStats:
    """:class:`SampleStats` of a 1-D sample (any array-like; flattened).

    >>> st = sample_stats([1.0, 2.0, 3.0])
    >>> st.mean, st.std, st.cv
    (2.0, 1.0, 0.5)
    """
    x = _as_1d(samples)
    n = int(x.size)
    mean = float(x.mean())
    if n < 2:
        std = stderr = None
    else:
        std = float(x.std(ddof=1))
        stderr = std / math.sqrt(n)
    nonzero = mean != 0.0
    return SampleStats(
        n=n,
        mean=mean,
        std=std,
        stderr=stderr,
        ci95=t_interval(x),
        cv=std / abs(mean) if std is not None and nonzero else None,
        rel_stderr=stderr / abs(mean) if stderr is not None and nonzero else None,
        shapiro_p=shapiro_p(x),
    )


def hutchinson_variance(frob_sq: float, diag_sq: float | None = None) -> float:
    r"""Variance of one Hutchinson sample vᵀAv of a symmetric A.

    Rademacher v, with :math:`\sum_i A_{ii}^2` (``diag_sq``) known — exact:

    .. math:: \mathrm{Var}(v^\top A v) = 2\big(\|A\|_F^2 - \textstyle\sum_i A_{ii}^2\big)

    ``diag_sq=None`` — :math:`2\|A\|_F^2`: an upper bound for Rademacher probes, and the
    exact variance for Gaussian probes. We usually do not know the diagonal of a Hessian,
    so the pipeline reports the bound; for a Hessian whose diagonal carries a large
    share of ‖A‖_F² the bound over-states the Rademacher variance.

    Use ‖∇²L‖_F², not ‖∇²F‖_F²: for Rademacher v, vᵀ(H + λI)v = vᵀHv + λd exactly, so
    the samples of tr ∇²F have the variance of those of tr ∇²L, and the exact form is
    shift-invariant (‖H+λI‖_F² − Σ(H_ii+λ)² = ‖H‖_F² − ΣH_ii²), but the bound is not:
    2‖H + λI‖_F² adds about 2λ²d + 4λ tr H. An estimated ``frob_sq`` (from E‖Av‖² =
    ‖A‖_F²) is itself noisy; a difference below 0 is clipped to 0.

    >>> hutchinson_variance(10.0, 4.0), hutchinson_variance(10.0)
    (12.0, 20.0)
    """
    frob_sq = float(frob_sq)
    if not frob_sq >= 0:
        raise ValueError(f"frob_sq must be >= 0, got {frob_sq!r}")
    if diag_sq is None:
        return 2.0 * frob_sq
    if not float(diag_sq) >= 0:
        raise ValueError(f"diag_sq must be >= 0, got {diag_sq!r}")
    return 2.0 * max(frob_sq - float(diag_sq), 0.0)


def predicted_cv(
    frob_sq: float,
    trace: float,
    num_probes: int,
    diag_sq: float | None = None,
) -> float | None:
    r"""Predicted CV of the M-probe Hutchinson mean: :math:`\sqrt{\mathrm{Var}(v^\top A v)} / (\sqrt M\,|\mathrm{tr}\,A|)`.

    With ``diag_sq`` the exact Rademacher value; without it the upper bound
    :math:`\sqrt{2\|A\|_F^2}/(\sqrt M |\mathrm{tr} A|)` (exact for Gaussian probes); see
    :func:`hutchinson_variance`. Compare with :attr:`SampleStats.rel_stderr`; with
    ``num_probes=1`` it predicts the per-sample :attr:`SampleStats.cv`. Use the trace and
    ‖·‖_F² of the same matrix (∇²L and tr ∇²L for the stochastic part). ``None`` when
    ``trace`` is 0.

    >>> round(predicted_cv(8.0, 2.0, 4), 12)    # sqrt(16) / (2 · 2)
    1.0
    """
    num_probes = int(num_probes)
    if num_probes < 1:
        raise ValueError(f"num_probes must be >= 1, got {num_probes}")
    if float(trace) == 0.0:
        return None
    return math.sqrt(hutchinson_variance(frob_sq, diag_sq)) / (math.sqrt(num_probes) * abs(float(trace)))


@dataclass(frozen=True)
class LinearFit:
    """Least-squares line y ≈ slope·x + intercept (in ``space``; for ``"loglog"`` x, y are
    log10 values, so ``slope`` is the power-law exponent). ``r2`` is the coefficient of
    determination of the fit (= Pearson r²), ``stderr_slope`` the slope's standard error
    (``None`` for two points), ``n`` the points used, ``x_min`` the smallest original x
    among them."""

    slope: float
    intercept: float
    r2: float | None
    stderr_slope: float | None
    n: int
    space: str
    x_min: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_slope(
    x: Any,
    y: Any,
    *,
    space: str = "linear",
    largest: int | None = None,
    x_min: float | None = None,
) -> LinearFit:
    """Least-squares fit of y on x, in ``"linear"`` or ``"loglog"`` (base-10) space.

    ``largest=k`` keeps the k points with the largest x, ``x_min`` those with x >= x_min
    (both may be given). Fig 2: ``fit_slope(theta_sq, psi, largest=k)`` gives the slope of
    Ψ_s vs ‖θ‖² at large radii, to set beside λ²/s and λ²/(2s)
    (:func:`villani.bounds.psi_slope_reference`); ``space="loglog"`` gives the growth
    exponent (1 for linear growth in ‖θ‖²) and needs x, y > 0.

    >>> fit_slope([1, 2, 3, 4], [1, 3, 5, 7]).slope
    2.0
    """
    xs = _as_1d(x)
    ys = _as_1d(y)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
    keep = np.ones(xs.size, dtype=bool) if x_min is None else xs >= float(x_min)
    idx = np.flatnonzero(keep)
    if largest is not None:
        if int(largest) < 2:
            raise ValueError(f"largest must be >= 2, got {largest}")
        idx = idx[np.argsort(xs[idx], kind="stable")[-int(largest) :]]
    if idx.size < 2:
        raise ValueError(f"a line needs at least 2 points, {idx.size} selected")
    xv, yv = xs[idx], ys[idx]
    if float(np.ptp(xv)) == 0.0:
        raise ValueError("all selected x are equal: the slope is undefined")
    if space == "loglog":
        if np.any(xv <= 0) or np.any(yv <= 0):
            raise ValueError("log-log fit needs x > 0 and y > 0")
        xv, yv = np.log10(xv), np.log10(yv)
    elif space != "linear":
        raise ValueError(f"space must be 'linear' or 'loglog', got {space!r}")
    res = _sps.linregress(xv, yv)
    r2 = None if float(np.ptp(yv)) == 0.0 else float(res.rvalue) ** 2
    return LinearFit(
        slope=float(res.slope),
        intercept=float(res.intercept),
        r2=r2,
        stderr_slope=float(res.stderr) if idx.size > 2 else None,
        n=int(idx.size),
        space=space,
        x_min=float(xs[idx].min()),
    )


def r_squared(y: Any, y_pred: Any) -> float | None:
    r"""Coefficient of determination of given predictions: :math:`1 - \sum(y-\hat y)^2 / \sum(y-\bar y)^2`.

    Unlike :attr:`LinearFit.r2` (the best line's), this scores a *fixed* prediction — e.g.
    the diagonal ŷ = x of Fig 6 — and can be negative. ``None`` when y is constant.

    >>> r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])    # 1 − 1/2
    0.5
    """
    yt, yp = _as_1d(y), _as_1d(y_pred)
    if yt.shape != yp.shape:
        raise ValueError(f"y and y_pred differ in length: {yt.size} vs {yp.size}")
    ss_tot = float(np.sum((yt - yt.mean()) ** 2))
    if ss_tot == 0.0:
        return None
    return 1.0 - float(np.sum((yt - yp) ** 2)) / ss_tot


def within_slope(x: Any, y: Any, clusters: Any) -> float | None:
    r"""Least-squares slope of y on x *within* clusters (the fixed-effects estimator): each
    cluster's means are removed from its x and y, and one line through the origin is fitted
    to the pooled deviations,

    .. math:: \hat\beta_W = \frac{\sum_c \sum_{i \in c} (x_i - \bar x_c)(y_i - \bar y_c)}
              {\sum_c \sum_{i \in c} (x_i - \bar x_c)^2}.

    With x = log‖θ‖ and y = log μ_max over the checkpoints of runs at different λ (one cluster
    per run), β̂_W is the exponent of ‖θ‖ at fixed λ: whatever differs *between* runs — λ
    itself, a run's level — cancels, where a slope over the pooled points would be carried by
    the λ between runs. A cluster of one point contributes nothing. ``None`` with fewer than
    2 degrees of freedom inside the clusters (points − clusters) or no variation of x inside
    them. Non-finite pairs are dropped first.

    >>> within_slope([0, 1, 2, 10, 11, 12], [0, 1, 2, 0, 1, 2], [0, 0, 0, 1, 1, 1])  # pooled: ≈ 0
    1.0
    """
    xs, ys = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    cl = np.asarray(clusters).ravel()
    if not xs.shape == ys.shape == cl.shape:
        raise ValueError(f"x, y and clusters differ in length: {xs.size}, {ys.size}, {cl.size}")
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys, cl = xs[ok], ys[ok], cl[ok]
    codes, idx = np.unique(cl, return_inverse=True)
    if xs.size - codes.size < 2:
        return None
    n = np.bincount(idx).astype(float)
    dx = xs - (np.bincount(idx, xs) / n)[idx]
    dy = ys - (np.bincount(idx, ys) / n)[idx]
    sxx = float(np.sum(dx * dx))
    # no variation inside any cluster: only the rounding of the cluster means is left
    return None if sxx <= 1e-24 * float(np.sum(xs * xs) + 1.0) else float(np.sum(dx * dy) / sxx)


@dataclass(frozen=True)
class CostFit:
    """y ≈ ``fixed`` + ``per_unit``·x, both ≥ 0; ``max_rel_residual`` = max ``|ŷ/y − 1|`` over
    the ``n`` fitted points."""

    fixed: float
    per_unit: float
    max_rel_residual: float
    n: int

    def __call__(self, x: Any) -> np.ndarray:
        return self.fixed + self.per_unit * np.asarray(x, dtype=float)


def fit_cost_model(x: Any, y: Any) -> CostFit:
    r"""Fit y ≈ a + b·x with a, b ≥ 0, minimising the *relative* error Σ((a + b·xᵢ)/yᵢ − 1)².

    The model of a cost (seconds, bytes) of one product at fixed tokens vs the parameter
    count x = d: each parameter enters a fixed number of multiply-adds per token in the
    forward, backward and double backward, and θ, ∇F, v and Hv are d-vectors, so the cost
    is asymptotically linear in d; ``a`` absorbs per-call overhead and fixed-size buffers,
    which dominate tiny models. A power law fitted to sizes where ``a`` dominates returns
    an exponent < 1 and extrapolates below the physical floor (for memory, 16 bytes per
    parameter in fp32). Relative weights keep the small sizes from being ignored;
    non-negativity is enforced with :func:`scipy.optimize.nnls`.

    >>> f = fit_cost_model([1.0, 2.0, 4.0], [3.0, 5.0, 9.0])    # exactly 1 + 2x
    >>> round(f.fixed, 9), round(f.per_unit, 9)
    (1.0, 2.0)
    """
    from scipy.optimize import nnls

    xs, ys = _as_1d(x), _as_1d(y)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
    ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    xs, ys = xs[ok], ys[ok]
    if xs.size < 2 or float(np.ptp(xs)) == 0.0:
        raise ValueError(f"a cost model needs at least 2 distinct positive x, got {xs.size} usable points")
    # scale x to O(1) so the two columns are comparably sized
    scale = float(xs.max())
    design = np.column_stack([1.0 / ys, (xs / scale) / ys])
    (a, b_scaled), _ = nnls(design, np.ones_like(ys))
    b = float(b_scaled) / scale
    fitted = a + b * xs
    return CostFit(fixed=float(a), per_unit=b, max_rel_residual=float(np.max(np.abs(fitted / ys - 1.0))),
                   n=int(xs.size))


@dataclass(frozen=True)
class Simpson:
    r"""The pooled r of x and y split by strata g (means x̄_g, ȳ_g; grand means x̄, ȳ):

    .. math:: r_{pool} = \underbrace{\frac{\sum_g\sum_{i\in g}(x_i-\bar x_g)(y_i-\bar y_g)}{S}}_{\text{within}}
              + \underbrace{\frac{\sum_g n_g(\bar x_g-\bar x)(\bar y_g-\bar y)}{S}}_{\text{between}},
              \qquad S = \sqrt{\textstyle\sum_i (x_i-\bar x)^2 \sum_i (y_i-\bar y)^2};

    ``r_within`` is the correlation of the deviations from the strata's means, ``r_between`` the
    n-weighted correlation of the strata's means, ``x_between_share`` the fraction of x's sum of
    squares that lies between strata."""

    pooled: float | None
    within: float | None
    between: float | None
    r_within: float | None
    r_between: float | None
    x_between_share: float | None


def simpson_decomposition(x: Any, y: Any, strata: Any) -> Simpson:
    """:class:`Simpson` of x and y by ``strata`` (``None`` parts where a sum of squares is 0).

    >>> d = simpson_decomposition([0, 1, 10, 11], [1, 2, -9, -8], ["a", "a", "b", "b"])
    >>> round(d.within + d.between - d.pooled, 12), d.r_within, d.r_between
    (0.0, 1.0, -1.0)
    """
    xs, ys, g = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(strata)
    codes = np.unique(g, return_inverse=True)[1].ravel()
    n = np.bincount(codes).astype(float)
    xm, ym = (np.bincount(codes, v) / n for v in (xs, ys))
    dx, dy = xs - xm[codes], ys - ym[codes]
    bx, by = xm - xs.mean(), ym - ys.mean()
    w = {k: float(np.sum(a * b)) for k, (a, b) in {"xy": (dx, dy), "xx": (dx, dx), "yy": (dy, dy)}.items()}
    b = {k: float(np.sum(n * a * c)) for k, (a, c) in {"xy": (bx, by), "xx": (bx, bx), "yy": (by, by)}.items()}
    total = math.sqrt((w["xx"] + b["xx"]) * (w["yy"] + b["yy"]))

    def ratio(num, den):
        return None if not den > 0 else float(num / den)

    return Simpson(ratio(w["xy"] + b["xy"], total), ratio(w["xy"], total), ratio(b["xy"], total),
                   ratio(w["xy"], math.sqrt(w["xx"] * w["yy"])), ratio(b["xy"], math.sqrt(b["xx"] * b["yy"])),
                   ratio(b["xx"], w["xx"] + b["xx"]))
