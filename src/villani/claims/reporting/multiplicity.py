r"""A family-wise statement over the measured rows: each row's p-value of its decision, and Holm.

**A row's p-value.** The verdict rule decides a row when its (1 − α) interval clears the
region's boundaries. For a t interval (c ± t_{1−α/2,ν}·se on its scale,
:func:`villani.claims.reporting.power.t_scale`) the interval excludes a boundary b iff

.. math:: p_b = 2\,\big(1 - F_{t,\nu}(|c - b|/\mathrm{se})\big) < \alpha ,

so the row is decided at level α iff p < α with p = max_b p_b over the finite boundaries when
c lies inside the region (supported needs every boundary cleared) and p = p_{b*}, b* the
nearest boundary, when c lies outside (refuted needs the nearest cleared). For a count
(Clopper–Pearson, the central two-sided binomial interval) p_b = min(1, 2·min(P(X ≤ k),
P(X ≥ k))) at the fraction b, the same duality, with n the interval's independent units (the
runs of a fraction of runs, never their checkpoints). A row tested per unit (Fig 2's rays, each at
1 − α/k) takes its units' p-values × k (Bonferroni): the smallest over the units that lie
outside the region when any does (refuted if any is), else the largest (supported needs all).

**Holm.** Over the m measured rows with a p-value, sorted p₍₁₎ ≤ … ≤ p₍ₘ₎, the adjusted
p₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1)·p₍ⱼ₎); a decision survives the family at level α when its
adjusted p is < α (family-wise error ≤ α under any dependence). ``verdict_holm`` is the row's
verdict where it survives, *inconclusive* where it does not.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as _sps

from villani.claims.reporting.power import t_scale
from villani.claims.catalogue.verdict import INCONCLUSIVE, REFUTED, SUPPORTED, Region

__all__ = ["decision_p", "holm", "family"]


def _t_p(iv, region: Region) -> float | None:
    sc = t_scale(iv)
    if sc is None:
        return None
    lo, hi = (sc.to(v) if math.isfinite(v) else v for v in (region.low, region.high))  # the maps are increasing
    bounds = [b for b in (lo, hi) if math.isfinite(b)]
    if not bounds or sc.se == 0:
        return None
    ps = {b: 2.0 * float(_sps.t.sf(abs(sc.centre - b) / sc.se, sc.dof)) for b in bounds}
    inside = lo <= sc.centre <= hi
    return max(ps.values()) if inside else ps[min(bounds, key=lambda b: abs(sc.centre - b))]


def _count_p(iv, region: Region) -> float | None:
    if iv is None or iv.estimate is None or not iv.units:
        return None
    n = int(iv.units)  # the independent trials: runs for a fraction of runs, not their checkpoints
    k = int(round(iv.estimate * n))
    bounds = [b for b in (region.low, region.high) if math.isfinite(b) and 0 < b < 1]
    if not bounds:
        return None

    def p_at(b: float) -> float:
        return min(1.0, 2.0 * min(float(_sps.binom.cdf(k, n, b)), float(_sps.binom.sf(k - 1, n, b))))

    x = k / n
    if region.contains(x):
        return max(p_at(b) for b in bounds)
    return p_at(min(bounds, key=lambda b: abs(x - b)))


def decision_p(iv, region: Region, units: Sequence = ()) -> float | None:
    """The p-value of a row's decision (module docstring); ``None`` where its interval gives none
    (no interval, an exact number, a hull)."""
    if units:
        ps = [(decision_p(u, region), u) for _, u in units]
        if any(p is None for p, _ in ps):
            return None
        k = len(ps)
        outside = [p for p, u in ps if not region.contains(u.estimate)]
        return min(1.0, k * (min(outside) if outside else max(p for p, _ in ps)))
    if iv is None or iv.low is None:
        return None
    if "Clopper" in iv.method:
        return _count_p(iv, region)
    return _t_p(iv, region)


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    p = np.asarray(ps, dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.size
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adj[i] = running
    return adj.tolist()


def family(rows: list[dict], alpha: float) -> dict:
    """Holm over the rows with a ``p_value``: sets ``p_holm`` and ``verdict_holm`` on every row (rows
    without a p-value keep their verdict only when it is not a decision) and returns the summary."""
    idx = [i for i, r in enumerate(rows) if r.get("p_value") is not None]
    adj = holm([rows[i]["p_value"] for i in idx]) if idx else []
    for r in rows:
        r["p_holm"], r["verdict_holm"] = None, ""
    for i, a in zip(idx, adj):
        v = rows[i]["verdict"]
        rows[i]["p_holm"] = a
        rows[i]["verdict_holm"] = v if v not in (SUPPORTED, REFUTED) or a < alpha else INCONCLUSIVE
    decided = [i for i in idx if rows[i]["verdict"] in (SUPPORTED, REFUTED)]
    kept = [i for i in decided if rows[i]["verdict_holm"] == rows[i]["verdict"]]
    return {"method": "Holm", "alpha": alpha, "rows": len(idx), "decided": len(decided), "survive": len(kept),
            "survivors": [rows[i]["id"] for i in kept],
            "lost": [rows[i]["id"] for i in decided if i not in kept]}
