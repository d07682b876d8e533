r"""The power plan beside every measured verdict: how big the treatment was, how much seeds
disagree, and how many seeds would decide the claim.

**The interval's own scale.** Every interval of a measured row is a t interval over k units
(seeds, runs) on some scale — raw (a mean per seed), Fisher's z (correlations: atanh), log
(a positive ratio) — read from its method (:func:`t_scale`): there it is c ± t_{(1+γ)/2, ν}·s/√k
with c the centre, s the between-unit SD of the statistic and ν = k − 1.

**Seeds to decide.** With the region's boundaries mapped to that scale and ``δ = |c − b*|`` the
distance from the centre to the *nearest* boundary b* (the one that decides: inside the
region every boundary must be cleared, the nearest last; outside, the nearest first), the
observed effect's interval at n units clears b* once

.. math:: t_{(1+\gamma)/2,\,n-1}\; s/\sqrt n \;<\; \delta ,

the smallest such n is :func:`seeds_to_decide` — "never" when δ = 0 (the effect sits on the
boundary). If the true effect is δ and the units are normal with SD s, an experiment at that n
decides about half the time (its estimate is as likely to land short of δ as beyond); the
n at which it decides with probability 0.8 is :func:`seeds_for_power`, from the noncentral t:
P(T′ > t_{(1+γ)/2, n−1}) ≥ 0.8 with T′ ~ t′(n − 1, δ√n/s) (the far tail, of probability
< (1 − γ)/2, ignored). Both are checked by simulation in ``tests/claims/test_power.py``.

**The treatment** (:func:`treatment`): between the λ extremes of the runs a row uses (one
λ > 0: it against λ = 0), the relative change of ‖θ‖² and the change of validation perplexity
at the last checkpoint (means over seeds), and the between-seed SD of that perplexity — the
size of what λ did against the noise it had to beat; ``lambda_visible`` says whether λ's effect on
perplexity reaches one seed SD (when it does not, claims about what λ does cannot be decided by
this design, whatever the statistic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats as _sps

from villani.claims.verdict import Region

__all__ = ["Scale", "t_scale", "nearest_boundary", "seeds_to_decide", "seeds_for_power", "plan", "treatment",
           "NEVER", "MAX_SEEDS"]

NEVER = "never"
MAX_SEEDS = 1_000_000
_R = 1.0 - 1e-12


@dataclass(frozen=True)
class Scale:
    """A t interval on its own scale: centre, half-width, units k, df ν, the map from the statistic's
    values to the scale, and its confidence γ."""

    name: str
    centre: float
    half: float
    k: int
    dof: float
    to: object
    confidence: float

    @property
    def se(self) -> float:
        return self.half / float(_sps.t.ppf((1 + self.confidence) / 2, self.dof))

    @property
    def sd(self) -> float:
        """The between-unit SD of the statistic on this scale: se·√k."""
        return self.se * math.sqrt(self.k)


def _atanh(v: float) -> float:
    return float(np.arctanh(np.clip(v, -_R, _R)))


def _log(v: float) -> float:
    return math.log(v) if v > 0 else -math.inf


def t_scale(iv) -> Scale | None:
    """The scale an interval (:class:`villani.stats.Interval`) is a symmetric t interval on, from its
    method; ``None`` for exact, Clopper–Pearson, per-unit hulls and intervals not given."""
    if iv is None or iv.low is None or iv.high is None or not iv.dof or iv.units < 2:
        return None
    m = iv.method
    if m.startswith("exact") or "Clopper" in m or "per unit" in m:
        return None
    if "squared" in m:
        if iv.low <= 0:
            return None  # the r interval straddles 0: its squared image has lost one end
        def to(v: float) -> float:
            return _atanh(math.sqrt(max(v, 0.0)))

        name = "Fisher z of |r|"
    elif "Fisher z" in m:
        to, name = _atanh, "Fisher z"
    elif "by exp" in m or "of ln values" in m:  # a t interval of logs, back-transformed
        to, name = _log, "log"
    else:
        to, name = float, "raw"
    lo, hi = to(iv.low), to(iv.high)
    return Scale(name, (lo + hi) / 2, (hi - lo) / 2, int(iv.units), float(iv.dof), to, float(iv.confidence))


def nearest_boundary(sc: Scale, region: Region) -> tuple[float | None, list[float]]:
    """(δ = distance from the centre to the boundary that decides, every finite boundary on the scale)."""
    ends = [sc.to(v) for v in (region.low, region.high) if math.isfinite(v)]
    bounds = [float(b) for b in ends if math.isfinite(b)]
    if not bounds:
        return None, []
    return min(abs(sc.centre - b) for b in bounds), bounds


def _smallest(delta: float, sd: float, ok) -> int | str:
    """The smallest n ≥ 2 with ``ok(n)`` (monotone in n), by bisection; :data:`NEVER` for δ = 0."""
    if not delta > 0:
        return NEVER
    if sd == 0:
        return 2
    if not ok(MAX_SEEDS):
        return f">{MAX_SEEDS:.0e}"
    lo, hi = 2, MAX_SEEDS
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def seeds_to_decide(delta: float, sd: float, confidence: float = 0.95) -> int | str:
    """Smallest n ≥ 2 with t_{(1+γ)/2, n−1}·sd/√n < δ; :data:`NEVER` for δ = 0, ``">1e6"`` beyond."""
    q = (1 + confidence) / 2
    return _smallest(delta, sd, lambda n: float(_sps.t.ppf(q, n - 1)) * sd / math.sqrt(n) < delta)


def seeds_for_power(delta: float, sd: float, confidence: float = 0.95, power: float = 0.8) -> int | str:
    """Smallest n ≥ 2 at which an experiment with true effect δ and unit SD sd clears the boundary
    with probability ≥ ``power`` (noncentral t, module docstring)."""
    q = (1 + confidence) / 2
    return _smallest(delta, sd, lambda n: float(_sps.nct.sf(_sps.t.ppf(q, n - 1), n - 1, delta * math.sqrt(n) / sd))
                     >= power)


def plan(iv, region: Region) -> dict:
    """The power columns of one row: ``seed_sd`` (on the interval's scale, named), ``seeds_to_decide``,
    ``seeds_80pct``; empty where the interval is not a t interval over units (the reason in ``power_note``)."""
    sc = t_scale(iv)
    if sc is None:
        why = ("no interval" if iv is None or iv.low is None else "not a t interval over units (exact, a count, or "
               "a hull of per-unit intervals, or an R² whose r straddles 0)")
        return {"seed_sd": None, "sd_scale": "", "seeds_to_decide": "", "seeds_80pct": "", "power_note": why}
    delta, _ = nearest_boundary(sc, region)
    if delta is None:
        return {"seed_sd": sc.sd, "sd_scale": sc.name, "seeds_to_decide": "", "seeds_80pct": "",
                "power_note": "the region has no finite boundary on this scale"}
    return {"seed_sd": sc.sd, "sd_scale": sc.name, "seeds_to_decide": seeds_to_decide(delta, sc.sd, sc.confidence),
            "seeds_80pct": seeds_for_power(delta, sc.sd, sc.confidence),
            "power_note": f"{sc.k} units now; distance to the nearest boundary {delta:.3g} on the {sc.name} scale"}


def treatment(m: pd.DataFrame, variant: str, lams, learned: bool = True) -> Mapping:
    """Between the λ extremes of ``lams`` for ``variant`` (one λ > 0: against λ = 0): relative change
    of ‖θ‖² and change of validation perplexity at the last checkpoint (means over seeds), and the
    between-seed SD of that perplexity (mean of the two λ's). Empty when there are not two λ."""
    lams = sorted({float(x) for x in lams})
    if len(lams) == 1 and lams[0] > 0:
        lams = [0.0] + lams
    rows = m[(m["variant"] == (variant or "adamw")) & m["lam"].isin(lams)]
    if learned and "run_learned" in rows:
        rows = rows[rows["run_learned"]]
    last = rows.sort_values("step").groupby(["lam", "seed"]).tail(1)
    have = sorted(last["lam"].unique())
    if len(lams) < 2 or len(have) < 2:
        return {}
    lo, hi = (last[last["lam"] == x] for x in (have[0], have[-1]))
    sd = [float(g["val_ppl"].std(ddof=1)) for g in (lo, hi) if len(g) > 1]
    theta = (hi["theta_sq_norm"].mean() - lo["theta_sq_norm"].mean()) / lo["theta_sq_norm"].mean()
    dp = float(hi["val_ppl"].mean() - lo["val_ppl"].mean())
    sd_ppl = float(np.mean(sd)) if sd else None
    return {"lam_low": have[0], "lam_high": have[-1], "delta_theta_sq_rel": float(theta), "delta_val_ppl": dp,
            "seed_sd_val_ppl": sd_ppl, "lambda_visible": None if sd_ppl is None else bool(abs(dp) >= sd_ppl)}
