r"""The paper's pooled correlation (Fig 7's R², over checkpoints × seeds) with an interval over runs.

The paper's R² at one λ is that of every checkpoint of every seed in one scatter — the
*pooled* correlation r_pool of (x, y) over all points, squared. Its points are not
independent (checkpoints of one run share the run), so its interval is a **run jackknife**
on Fisher's z scale: with k runs (clusters), z = atanh r_pool on all of them and z₍₋ᵢ₎ on all
but run i, the pseudo-values

.. math:: p_i = k\,z - (k-1)\,z_{(-i)}, \qquad \bar p \pm t_{(1+c)/2,\,k-1}\; s_p/\sqrt k,

back-transformed by tanh (Quenouille–Tukey; the units are runs, so the interval respects
them). The R² interval is the r interval squared ([0, max(lo², hi²)] when it straddles 0).

**Within strata** (Fig 7's direction within each λ): pooled across λ, r mixes the association
within each λ with the spread of the λ's means — Simpson's paradox, where a shift of a whole
stratum (−λd moves every checkpoint of one λ alike; over-decay raises its perplexity) sets the
sign. :func:`stratified_correlation_interval` takes each stratum's pooled r on Fisher's scale,
averages them, z̄ = mean_g atanh r_pool(g), and jackknifes z̄ over the clusters (seeds, each
holding a run in every stratum); :func:`villani.statistics.samples.simpson_decomposition` splits the
pooled r exactly into its within- and between-strata parts.

A difference of correlation *strength* between two groups (Fig 7: λ = 10⁻² against 0) is
atanh|r_a| − atanh|r_b| (its sign is that of R²_a − R²_b), jackknifed over the clusters that
hold one run of each group (seeds).

Coverage at the ledger's designs (2 runs × 3 checkpoints after step 0 on the default, 3 × 4
on the laptop configuration, 3 × 60 on PTB), simulated with a run effect and AR(1)
checkpoint noise: ``tests/claims/test_coverage_pooled.py``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy import stats as _sps

from villani.statistics.intervals import R_CLIP, Interval, pearson_r

__all__ = ["pooled_r", "jackknife", "pooled_correlation_interval", "stratified_correlation_interval",
           "strength_difference_interval"]


def pooled_r(x: Any, y: Any) -> float | None:
    """Pearson r of every (x, y) pair together (the paper's pooled estimand)."""
    return pearson_r(x, y)


def _z(r: float | None) -> float | None:
    return None if r is None else float(np.arctanh(np.clip(r, -R_CLIP, R_CLIP)))


def jackknife(stat: Callable[[np.ndarray], float | None], clusters: Any, confidence: float = 0.95
              ) -> tuple[float | None, float | None, float | None, int]:
    """(estimate, low, high, clusters) of the leave-one-cluster-out jackknife t interval of
    ``stat(mask)`` (``mask`` selects the rows it uses); no interval for < 2 clusters, an
    undefined leave-one-out value, or pseudo-values that do not vary."""
    cl = np.asarray(clusters)
    keys = list(dict.fromkeys(cl.tolist()))
    k = len(keys)
    full = stat(np.ones(cl.size, dtype=bool))
    if full is None or k < 2:
        return full, None, None, k
    loo = [stat(cl != key) for key in keys]
    if any(v is None or not math.isfinite(v) for v in loo):
        return full, None, None, k
    ps = k * full - (k - 1) * np.asarray(loo, dtype=float)
    sd = float(ps.std(ddof=1))
    if sd == 0.0:
        return full, None, None, k
    lo, hi = _sps.t.interval(confidence, k - 1, loc=float(ps.mean()), scale=sd / math.sqrt(k))
    return full, float(lo), float(hi), k


def pooled_correlation_interval(x: Any, y: Any, runs: Any, *, squared: bool = False, confidence: float = 0.95
                                ) -> Interval:
    """The pooled r (``squared``: R²) of x and y with its run-jackknife interval (module docstring)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    est, lo, hi, k = jackknife(lambda m: _z(pooled_r(xs[m], ys[m])), runs, confidence)
    method = f"pooled Pearson r over all points, run jackknife on Fisher z (t, df = {k - 1}), back-transformed"
    r = None if est is None else float(np.tanh(est))
    lo, hi = (None, None) if lo is None else (float(np.tanh(lo)), float(np.tanh(hi)))
    if squared and r is not None:
        r = r * r
        if lo is not None:
            lo, hi = (0.0, max(lo * lo, hi * hi)) if lo < 0 < hi else tuple(sorted((lo * lo, hi * hi)))
        method += ", squared"
    if lo is None and est is not None:
        method += " — no interval: fewer than 2 runs, or runs that do not vary"
    return Interval(r, lo, hi, float(confidence), int(xs.size), k, None if lo is None else k - 1, method)


def strength_difference_interval(x: Any, y: Any, group: Any, clusters: Any, a: Any, b: Any,
                                 confidence: float = 0.95) -> Interval:
    """atanh|r_pool(group a)| − atanh|r_pool(group b)| with the jackknife over ``clusters`` (seeds,
    each holding a run of both groups): > 0 iff R² is larger in group a."""
    xs, ys, g = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(group)

    def stat(m):
        ra, rb = (pooled_r(xs[m & (g == v)], ys[m & (g == v)]) for v in (a, b))
        return None if ra is None or rb is None else _z(abs(ra)) - _z(abs(rb))

    est, lo, hi, k = jackknife(stat, clusters, confidence)
    method = (f"atanh|r_pool| of group {a} − of group {b}, jackknife over {k} clusters (t, df = {k - 1})"
              + ("" if lo is not None or est is None else " — no interval: fewer than 2 clusters or no spread"))
    return Interval(est, lo, hi, float(confidence), int(xs.size), k, None if lo is None else k - 1, method)


def stratified_correlation_interval(x: Any, y: Any, strata: Any, clusters: Any, confidence: float = 0.95
                                    ) -> Interval:
    r"""The association within strata: tanh of :math:`\bar z = \frac1G\sum_g \operatorname{atanh} r_{pool}(g)`,
    the mean over the G strata of each one's pooled r (all its points), with the jackknife of z̄
    over ``clusters`` (seeds: each holds a run in every stratum; module docstring). A shift of a
    whole stratum in x or y leaves it unchanged; no interval where a stratum's r is undefined."""
    xs, ys, g = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(strata)
    levels = list(dict.fromkeys(g.tolist()))

    def stat(m):
        zs = [_z(pooled_r(xs[m & (g == v)], ys[m & (g == v)])) for v in levels]
        return None if any(z is None for z in zs) else float(np.mean(zs))

    est, lo, hi, k = jackknife(stat, clusters, confidence)
    method = (f"mean over {len(levels)} strata of atanh r_pool (each stratum's points pooled), jackknife over {k} "
              f"clusters (t, df = {k - 1}), back-transformed"
              + ("" if lo is not None or est is None else " — no interval: fewer than 2 clusters or no spread"))
    back = (lambda v: None if v is None else float(np.tanh(v)))
    return Interval(back(est), back(lo), back(hi), float(confidence), int(xs.size), k, None if lo is None else k - 1,
                    method)
