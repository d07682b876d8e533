r"""Signed correlations and the confidence intervals of the claims ledger (numpy and scipy).

Every interval method here has a coverage test at the ledger's designs
(``tests/claims/test_coverage.py``): simulated data sets with a known truth shaped like the
ledger's data, empirical coverage of a 95% interval in [0.93, 0.97] (Clopper–Pearson: ≥ 0.95
at every true fraction, which is what "exact" promises).

- :func:`pearson_r`, :func:`spearman_rho` — signed correlations (a direction, not R² alone);
- :func:`seed_interval` — t interval of the mean of one value per seed (df = seeds − 1);
  ``scale="log"`` for positive, skewed per-seed values (ratios, CVs, traces): the t interval
  of their logs, back-transformed — an interval for the geometric mean;
- :func:`run_correlations`, :func:`correlation_interval` — a correlation within each run,
  pooled over the runs on Fisher's z scale with :func:`seed_interval`;
- :func:`probe_combination_interval` — t interval over probes of a linear combination
  Σ cᵢ ȳᵢ of Hutchinson means that reuse the same probes at every point (Fig 2's ray slopes);
- :func:`combination_interval` — Welch–Satterthwaite t interval of Σ cᵢ ȳᵢ of *independent*
  means (each point with its own probes);
- :func:`proportion_interval` — Clopper–Pearson interval of a count of independent units;
  :func:`run_proportion_interval` — the same over runs, for a property checked at every
  checkpoint of a run (checkpoints of one run are not independent);
- :func:`stratified_interval` — the mean over strata (seeds) of each stratum's mean over its
  units (Fig 3's random slices around each seed's θ₀), Welch–Satterthwaite over the strata;
- :func:`exact_value` — [v, v] for a number without sampling error.

No method returns a zero-width interval from a sample: units that do not vary give no
interval, and the verdict is then inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np
from scipy import special as _special
from scipy import stats as _sps

__all__ = ["pearson_r", "spearman_rho", "Interval", "seed_interval", "combination_interval",
           "probe_combination_interval", "run_correlations", "correlation_interval", "proportion_interval",
           "run_proportion_interval", "stratified_interval", "exact_value"]


# --------------------------------------------------------------------------- signed correlations


def _pairs(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray] | None:
    xs, ys = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in length: {xs.size} vs {ys.size}")
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if xs.size < 3 or float(np.ptp(xs)) == 0.0 or float(np.ptp(ys)) == 0.0:
        return None
    return xs, ys


def pearson_r(x: Any, y: Any) -> float | None:
    """Pearson correlation of the finite pairs (:func:`scipy.stats.pearsonr`); ``None`` for < 3
    pairs or a constant side.

    >>> round(pearson_r([1, 2, 3], [3, 2, 1]), 12)
    -1.0
    """
    xy = _pairs(x, y)
    return None if xy is None else float(np.clip(_sps.pearsonr(*xy).statistic, -1.0, 1.0))


def spearman_rho(x: Any, y: Any) -> float | None:
    """Spearman rank correlation of the finite pairs (ties averaged); ``None`` as :func:`pearson_r`.

    >>> spearman_rho([1, 2, 3, 4], [1, 4, 9, 16])
    1.0
    """
    xy = _pairs(x, y)
    return None if xy is None else float(_sps.spearmanr(*xy).statistic)


# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A statistic and its confidence interval.

    ``estimate`` on all the data; ``low``/``high`` the interval (``None`` when it cannot be
    given — too few units, or units that do not vary: a zero-width interval from a sample
    would claim certainty the sample does not have); ``n`` the values behind the
    estimate, ``units`` the independent units the interval is over (seeds, rays), ``dof``
    its degrees of freedom (``None``: exact or not t-based), ``method`` how it was made."""

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    n: int
    units: int
    dof: float | None
    method: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _t_half(confidence: float, dof: float, se: float) -> float:
    """t_{(1+c)/2, dof} · se (:func:`scipy.special.stdtrit`, the quantile
    :func:`scipy.stats.t.interval` computes, without its per-call overhead)."""
    return float(_special.stdtrit(dof, 0.5 + confidence / 2.0)) * se


def _check_confidence(confidence: float) -> float:
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return float(confidence)


def seed_interval(values: Any, confidence: float = 0.95, *, unit: str = "seed", scale: str = "linear") -> Interval:
    r"""Student-t interval of the mean of one value per independent unit (a statistic per
    seed): :math:`\bar x \pm t_{(1+c)/2,\,k-1}\, s/\sqrt k` with k units (df = k − 1,
    :func:`scipy.stats.t.interval`). Exact for normal unit values; with k = 2 it is wide
    (t₀.₉₇₅,₁ = 12.7), which is what two seeds know. No interval (``low = high = None``) for
    k < 2 or when every unit gives the same value. Non-finite values are dropped first.

    ``scale="log"`` — for positive values whose spread is multiplicative (ratios, CVs, traces,
    tr/λd): the interval above of yᵢ = ln xᵢ, back-transformed, :math:`\exp(\bar y \pm t\,s_y/\sqrt k)`,
    with the estimate :math:`e^{\bar y}` — the **geometric mean**, the median of a log-normal.
    On the linear scale the t interval of skewed values under-covers their mean (per-seed
    ratios with a log-SD of 0.8, like 170 / 39.8 / 46.2: 0.92, 0.88, 0.86 at 2, 3, 5 seeds,
    ``tests/claims/test_coverage.py``); the log-scale interval covers the geometric mean at
    0.95 there, and is unchanged by inverting the ratio (1/x gives 1/[hi, lo]). Use it for a
    positive statistic whose claim is about a typical (multiplicative) size; use the linear
    scale for values that can be ≤ 0 (differences, slopes, correlations on Fisher's z).
    A value ≤ 0 on the log scale raises ValueError.

    >>> iv = seed_interval([1.0, 2.0, 3.0])
    >>> round(iv.low, 6), round(iv.high, 6), iv.dof
    (-0.484138, 4.484138, 2)
    >>> g = seed_interval([170.0, 39.8, 46.2], scale="log")
    >>> round(g.estimate, 1), round(g.low, 1), round(g.high, 1)
    (67.9, 9.3, 493.6)
    """
    c = _check_confidence(confidence)
    if scale not in ("linear", "log"):
        raise ValueError(f"scale must be 'linear' or 'log', got {scale!r}")
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if scale == "log":
        if np.any(v <= 0):
            raise ValueError(f"a log-scale interval needs values > 0, got {v[v <= 0][:3].tolist()}")
        iv = seed_interval(np.log(v), c, unit=unit)
        base, _, why = iv.method.partition(" — no interval: ")
        with np.errstate(over="ignore"):  # a bound beyond the floats is +inf: no finite end, inconclusive
            back = (lambda x: None if x is None else float(np.exp(x)))
            est, lo, hi = back(iv.estimate), back(iv.low), back(iv.high)
        method = f"t interval of ln values over {base[len('t interval over '):]}, back-transformed: the geometric mean"
        return Interval(est, lo, hi, c, iv.n, iv.units, iv.dof,
                        method + (f" — no interval: {why}" if why else ""))
    k = int(v.size)
    method = f"t interval over {k} {unit}s (df = {max(k - 1, 0)}), one value per {unit}"
    if k == 0:
        return Interval(None, None, None, c, 0, 0, None, method)
    est = float(v.mean())
    if k < 2 or float(np.ptp(v)) == 0.0:
        why = f"one {unit}" if k < 2 else f"every {unit} gives {est:.4g}"
        return Interval(est, None, None, c, k, k, None, method + f" — no interval: {why}")
    half = _t_half(c, k - 1, float(v.std(ddof=1)) / math.sqrt(k))
    return Interval(est, est - half, est + half, c, k, k, k - 1, method)


def combination_interval(estimate: float, coefs: Any, stderrs: Any, dof_each: Any, confidence: float = 0.95
                         ) -> Interval:
    r"""Welch–Satterthwaite t interval of a linear combination Σ cᵢ ȳᵢ of independent means
    whose standard errors sᵢ were each estimated on νᵢ degrees of freedom — e.g. a line's
    slope fitted to points each of which is a Hutchinson mean of M probes (νᵢ = M − 1) drawn
    afresh at every point. When the points reuse the same probes their errors are correlated
    and this variance is not the combination's: use :func:`probe_combination_interval`.

    .. math:: \mathrm{se}^2 = \sum_i c_i^2 s_i^2, \qquad
              \nu = \frac{\mathrm{se}^4}{\sum_i c_i^4 s_i^4/\nu_i}.

    No interval when se = 0.

    >>> iv = combination_interval(1.0, [1.0], [0.5], [4])
    >>> round(iv.high - 1.0, 6) == round(0.5 * float(_sps.t.ppf(0.975, 4)), 6)
    True
    """
    c = _check_confidence(confidence)
    cf, se, nu = (np.asarray(a, dtype=float).ravel() for a in (coefs, stderrs, dof_each))
    if not cf.shape == se.shape == nu.shape or np.any(nu <= 0) or np.any(~np.isfinite(se)) or np.any(se < 0):
        raise ValueError("coefs, stderrs (finite, >= 0) and dof_each (> 0) need one entry each")
    parts = (cf * se) ** 2
    var = float(parts.sum())
    method = "Welch–Satterthwaite t interval of a combination of means"
    if var == 0.0:
        return Interval(float(estimate), None, None, c, int(cf.size), int(cf.size), None, method + " — no interval: se 0")
    dof = var**2 / float(np.sum(parts**2 / nu))
    half = _t_half(c, dof, math.sqrt(var))
    return Interval(float(estimate), float(estimate) - half, float(estimate) + half, c, int(cf.size), int(cf.size),
                    dof, method)


def probe_combination_interval(samples: Any, coefs: Any, confidence: float = 0.95) -> Interval:
    r"""t interval over probes of a linear combination Σᵢ cᵢ ȳᵢ of Hutchinson means ȳᵢ that use
    the **same** M probes v₁ … v_M at every point i (``samples[j, i]`` = probe j's estimate at
    point i, e.g. v_jᵀ∇²L(θᵢ)v_j; the fitted slope of a ray when cᵢ = (xᵢ − x̄)/Σ(x − x̄)²).

    Probe j's combination z_j = Σᵢ cᵢ samples[j, i] is an unbiased estimate of Σ cᵢ trᵢ, and
    the z_j are independent and identically distributed over j — whatever the correlation of
    one probe's errors across points (on the default run's rays: 0.93 between the two smallest
    radii, −0.3 … 0.1 among the largest). Σ cᵢ ȳᵢ = z̄, and its interval is
    :func:`seed_interval` of the z_j (df = M − 1). A deflated estimate qualifies: each sample is
    tr(QᵀHQ) + v_jᵀ(I − QQᵀ)H(I − QQᵀ)v_j with Q from a start vector independent of v_j, so
    given the Q's the z_j are again i.i.d. with mean Σ cᵢ trᵢ. The Welch–Satterthwaite
    interval of :func:`combination_interval` ignores the correlation: with errors correlated
    ≈ 0.9 across radii it over-covers (0.98–0.99 at 3 radii × 4 probes and 4 × 8,
    ``tests/claims/test_coverage.py``), and positive correlation between points whose weights
    share a sign makes it under-cover. Where the points happen to be uncorrelated this interval
    is the wider of the two (df = M − 1: 1.0–1.5× on the default run's rays).

    >>> iv = probe_combination_interval([[1.0, 2.0], [1.0, 4.0], [2.0, 4.0]], [-1.0, 1.0])
    >>> iv.estimate, iv.units, iv.dof
    (2.0, 3, 2)
    """
    x = np.asarray(samples, dtype=float)
    cf = np.asarray(coefs, dtype=float).ravel()
    if x.ndim != 2 or x.shape[1] != cf.size or not np.all(np.isfinite(x)):
        raise ValueError(f"samples must be finite (probes, points) with one coefficient per point; got {x.shape} "
                         f"and {cf.size} coefficients")
    iv = seed_interval(x @ cf, confidence, unit="probe")
    return Interval(iv.estimate, iv.low, iv.high, iv.confidence, int(x.size), iv.units, iv.dof,
                    "per-probe combinations (the same probes at every point), " + iv.method)


#: ``|r|`` is clipped here before atanh (a run whose points lie exactly on a line).
R_CLIP = 1.0 - 1e-9


def run_correlations(x: Any, y: Any, clusters: Any, *, rank: bool = False) -> np.ndarray:
    """Pearson r (``rank``: Spearman ρ, the Pearson r of within-run ranks) of x and y within each
    cluster, in order of first appearance; NaN where undefined (< 3 finite pairs, a constant side).

    Kept by hand: grouped sums (:func:`numpy.bincount`) compute every run at once, ≈ 200× faster
    than one :func:`scipy.stats.pearsonr` call per run (300 runs: 0.3 ms vs 80 ms), and the
    coverage test makes 10⁴ of them; equal to scipy's r and ρ within 1e-15
    (``tests/statistics/test_samples.py::test_run_correlations_by_hand_equal_scipy_per_run_and_are_faster``).

    >>> run_correlations([1, 2, 3, 1, 2, 3], [1, 2, 3, 3, 2, 1], [7, 7, 7, 8, 8, 8]).round(12).tolist()
    [1.0, -1.0]
    """
    xs, ys, cl = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel(), np.asarray(clusters).ravel()
    if not xs.shape == ys.shape == cl.shape:
        raise ValueError(f"x, y and clusters differ in length: {xs.size}, {ys.size}, {cl.size}")
    codes = np.unique(cl, return_index=True, return_inverse=True)
    order = np.argsort(codes[1])  # first appearance
    g = np.argsort(order)[codes[2]]
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys, g = xs[ok], ys[ok], g[ok]
    k = order.size
    if rank:
        xs, ys = xs.copy(), ys.copy()
        for j in range(k):
            m = g == j
            xs[m], ys[m] = _sps.rankdata(xs[m]), _sps.rankdata(ys[m])
    n = np.bincount(g, minlength=k).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        xc = xs - (np.bincount(g, xs, k) / n)[g]
        yc = ys - (np.bincount(g, ys, k) / n)[g]
        sxx, syy, sxy = (np.bincount(g, a * b, k) for a, b in ((xc, xc), (yc, yc), (xc, yc)))
        r = sxy / np.sqrt(sxx * syy)
    r[(n < 3) | ~(sxx > 0) | ~(syy > 0)] = np.nan
    return np.clip(r, -1.0, 1.0)


def correlation_interval(x: Any, y: Any, clusters: Any, *, kind: str = "pearson", confidence: float = 0.95
                         ) -> Interval:
    r"""A correlation of x and y within each cluster (a run: its checkpoints — checkpoints of one
    run are not independent, runs are), pooled over the runs on Fisher's z scale:
    :func:`seed_interval` of zᵣ = atanh rᵣ (df = runs − 1), back-transformed by tanh.

    ``kind``: ``"pearson"`` r, ``"r2"`` (the r interval squared: [0, max(lo², hi²)] when it
    straddles 0), or ``"spearman"`` ρ (per-run ρ of ≥ 10 checkpoints only: at fewer it is too
    discrete for a t interval — its coverage fails, ``tests/claims/test_coverage.py``). The
    estimate is tanh(mean zᵣ), the correlation of a typical run.

    >>> iv = correlation_interval([1, 2, 3, 1, 2, 3], [3, 2, 1, 3, 1, 0], [0, 0, 0, 1, 1, 1])
    >>> iv.estimate < -0.99, iv.units, iv.dof
    (True, 2, 1)
    """
    if kind not in ("pearson", "r2", "spearman"):
        raise ValueError(f"kind must be 'pearson', 'r2' or 'spearman', got {kind!r}")
    r = run_correlations(x, y, clusters, rank=kind == "spearman")
    n = int(np.asarray(x).size)
    name = "Spearman ρ" if kind == "spearman" else "Pearson r"
    if kind == "spearman" and n < 10 * max(r.size, 1):
        return Interval(None, None, None, float(confidence), n, int(r.size), None,
                        "Spearman ρ within runs needs ≥ 10 checkpoints per run for a covering interval")
    iv = seed_interval(np.arctanh(np.clip(r, -R_CLIP, R_CLIP)), confidence, unit="run")
    base, _, why = iv.method.partition(" — no interval: ")
    method = f"{name} within each run, Fisher z = atanh r, {base}, back-transformed by tanh"
    lo, hi, est = (None if v is None else float(np.tanh(v)) for v in (iv.low, iv.high, iv.estimate))
    if kind == "r2" and est is not None:
        est = est * est
        if lo is not None:
            lo, hi = (0.0, max(lo * lo, hi * hi)) if lo < 0 < hi else tuple(sorted((lo * lo, hi * hi)))
        method += ", squared"
    method += f" — no interval: {why}" if why else ""
    return Interval(est, lo, hi, iv.confidence, n, iv.units, iv.dof, method)


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Clopper–Pearson (exact binomial) interval of the fraction k/n
    (:meth:`scipy.stats.binomtest(...).proportion_ci <scipy.stats.binomtest>`, ``method="exact"``):
    coverage ≥ ``confidence`` at every true fraction. ``None`` bounds for n = 0.

    >>> iv = proportion_interval(10, 10)
    >>> iv.estimate, iv.high, round(iv.low, 3)
    (1.0, 1.0, 0.692)
    """
    k, n = int(k), int(n)
    c = _check_confidence(confidence)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k = {k}, n = {n}")
    method = "Clopper–Pearson (exact binomial)"
    if n == 0:
        return Interval(None, None, None, c, 0, 0, None, method)
    lo, hi = _clopper_pearson(k, n, c)
    return Interval(k / n, lo, hi, c, n, n, None, method)


@lru_cache(maxsize=4096)
def _clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    ci = _sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def run_proportion_interval(ok: Any, runs: Any, confidence: float = 0.95) -> Interval:
    r"""Clopper–Pearson interval of the fraction of **runs** in which a property holds at every
    checkpoint (``ok`` one boolean per checkpoint, ``runs`` its run). Checkpoints of one run
    are not independent — a run that breaks a bound at one step tends to break it at the
    next — so a Clopper–Pearson interval over pooled checkpoints claims more than it has
    (autocorrelated checkpoints and a run effect, true fraction 0.9: coverage 0.88 at 2 runs ×
    12 checkpoints, 0.64 at 4 × 12, 0.32 at 2 × 60, ``tests/claims/test_coverage.py``); runs are
    independent, and this interval is exact for the fraction of runs that hold throughout.

    >>> iv = run_proportion_interval([True, True, False, True, True, True], [0, 0, 0, 1, 1, 1])
    >>> iv.estimate, iv.units
    (0.5, 2)
    """
    ok_, r = np.asarray(ok, dtype=bool).ravel(), np.asarray(runs).ravel()
    if ok_.shape != r.shape:
        raise ValueError(f"ok and runs differ in length: {ok_.size} vs {r.size}")
    codes = np.unique(r, return_inverse=True)[1]
    n = int(codes.max()) + 1 if codes.size else 0
    held = np.bincount(codes, weights=~ok_, minlength=n) == 0
    iv = proportion_interval(int(held.sum()), n, confidence)
    return Interval(iv.estimate, iv.low, iv.high, iv.confidence, int(ok_.size), n, None,
                    f"Clopper–Pearson over {n} runs (a run counts when every checkpoint holds)")


def stratified_interval(groups: Mapping[Any, Any], confidence: float = 0.95, *, unit: str = "slice",
                        stratum: str = "seed") -> Interval:
    r"""Interval of the mean over k strata of each stratum's mean over its own units — the
    random slices drawn around each seed's θ₀ (Fig 3): units independent within a stratum,
    strata fixed (the estimand is the mean over *these* seeds' populations of units, so a
    stratum effect — one θ₀ more anisotropic than another — is not error):

    .. math:: \hat\mu = \frac1k\sum_s \bar x_s, \qquad
              \mathrm{se}^2 = \frac1{k^2}\sum_s \frac{s_s^2}{m_s},

    Welch–Satterthwaite degrees of freedom (:func:`combination_interval`, νₛ = mₛ − 1). With one
    unit in some stratum there is no within-stratum variance: then the t interval over the
    strata's means (:func:`seed_interval`, df = k − 1), which also covers a stratum effect.
    ``units`` of the result counts strata, ``n`` units — a design of k strata × m units, so the
    power plan (:mod:`villani.claims.reporting.power`) counts strata. Non-finite values are dropped.

    >>> iv = stratified_interval({0: [0.2, 0.4, 0.3], 1: [0.6, 0.5, 0.7]})
    >>> round(iv.estimate, 6), iv.units, iv.n
    (0.45, 2, 6)
    """
    c = _check_confidence(confidence)
    vals = {key: np.asarray(v, dtype=float).ravel() for key, v in groups.items()}
    vals = {key: v[np.isfinite(v)] for key, v in vals.items() if np.isfinite(v).any()}
    k, n = len(vals), int(sum(v.size for v in vals.values()))
    means = [float(v.mean()) for v in vals.values()]
    if k == 0 or min(v.size for v in vals.values()) < 2:
        iv = seed_interval(means, c, unit=stratum)
        head = f"t interval over {k} {stratum}s' means (df = {max(k - 1, 0)}; a {stratum} with one {unit})"
        why = iv.method.partition(" — no interval: ")[2]
        return Interval(iv.estimate, iv.low, iv.high, c, n, k, iv.dof, head + (f" — no interval: {why}" if why else ""))
    est = float(np.mean(means))
    iv = combination_interval(est, np.full(k, 1.0 / k), [float(v.std(ddof=1)) / math.sqrt(v.size) for v in vals.values()],
                              [v.size - 1 for v in vals.values()], c)
    dof = "" if iv.dof is None else f", df = {iv.dof:.3g}"
    head = (f"Welch–Satterthwaite t interval over {n} {unit}s stratified by {stratum} ({k} {stratum}s{dof}): "
            f"the mean of each {stratum}'s mean")
    why = "" if iv.low is not None else f" — no interval: every {stratum}'s {unit}s give one value"
    return Interval(est, iv.low, iv.high, c, n, k, iv.dof, head + why)


def exact_value(value: float | None, note: str = "a deterministic number (no sampling)") -> Interval:
    """A number without sampling error: the interval [v, v] (the verdict rule's point value)."""
    return Interval(value, value, value, 1.0, 1, 1, None, "exact: " + note)
