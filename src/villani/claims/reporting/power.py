r"""The power plan beside every measured verdict: how big the treatment was, how much the units
disagree, and how many units (seeds, where the units are seeds) would decide the claim —
planned from the claim's region, never from the observed estimate.

**The interval's own scale.** Every interval of a measured row is a t interval over k units
(seeds, runs, slices) on some scale — raw (a mean per seed), Fisher's z (correlations: atanh),
log (a positive ratio) — read from its method (:func:`t_scale`): there it is c ± t_{(1+γ)/2, ν}·s/√k
with c the centre, s the between-unit SD of the statistic and ν = k − 1. s is the SD of the
statistic *as it is built*: for a contrast within seed (λ against λ = 0 on the same seed, a
jackknife leaving a seed out of both groups) it is the SD of the paired differences, never the
SD of either arm. s is itself estimated from the k units (one degree of freedom at 2 seeds), and
the plan is no surer than it.

**The minimal effect of interest** δ (:func:`min_effect`), on the interval's scale, from the
claim's region alone:

- a region with two ends (the paper's value ± a tolerance, [0.4, 0.9]): the distance from its
  centre to the nearer end — the claim's own tolerance;
- one end b ≠ 0 (a threshold, ≥ 0.8, < 0.03): :data:`THRESHOLD_TOLERANCE` = 25 % of ``|b|``, the
  ledger's usual relative tolerance, mapped to the scale (the smaller side where the two differ);
- a sign (b = 0) on Fisher's z: a correlation of :data:`MIN_CORRELATION` = 0.3, atanh 0.3 = 0.31 —
  weaker than any the paper reports (its weakest, Fig 7's R² = 0.23 at λ = 0, is ``|r|`` = 0.48);
- a sign on a raw scale: the claim states no size, so there is no effect to plan for (the row
  says so).

**Seeds to decide** (:func:`seeds_to_decide`): the smallest n at which an experiment decides
with probability ≥ :data:`POWER` = 0.8 when the truth is δ from the region's boundary — on
either side, and for a two-ended region also at its centre, where *both* ends must be cleared:

.. math::

    P_{\text{out}}(n) = P\big(T' > t_{(1+\gamma)/2,\,n-1}\big),\quad T' \sim t'(n-1,\ \delta\sqrt n/s);

    P_{\text{in}}(n) = \mathbb E_{\hat s}\Big[\Phi\big((d_2 - h)\sqrt n/s\big) - \Phi\big((h - d_1)\sqrt n/s\big)\Big]^+,
    \quad h = t_{(1+\gamma)/2,\,n-1}\,\hat s/\sqrt n,

with d₁, d₂ the distances from the centre to the two ends and ŝ² ~ s²χ²_{n−1}/(n − 1)
(:func:`p_outside`, :func:`p_inside`). The plan is max(n_out, n_in). Checked by simulation at
our designs with the ledger's own intervals and verdict rule (``tests/claims/test_power.py``).

**The treatment** (:func:`treatment`): between the λ extremes of the runs a row uses (one
λ > 0: it against λ = 0), the relative change of ‖θ‖² and the change of validation perplexity
at the last checkpoint (means over seeds), the between-seed SD of that perplexity, and the
contrast as the within-seed statistics use it — the per-seed difference, its SD and its t
interval (paired by seed: the same initialisation and batches at every λ) — the size of what λ
did against the noise it had to beat; ``lambda_visible`` says whether λ's effect on perplexity
reaches one seed SD.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import integrate as _integrate
from scipy import stats as _sps

from villani.claims.catalogue.verdict import Region
from villani.statistics.intervals import seed_interval

__all__ = ["Scale", "t_scale", "min_effect", "p_outside", "p_inside", "seeds_to_decide", "plan", "treatment",
           "MAX_SEEDS", "POWER", "THRESHOLD_TOLERANCE", "MIN_CORRELATION"]

MAX_SEEDS = 1_000_000
#: The probability of a decision the plan asks for.
POWER = 0.8
#: A threshold's minimal effect of interest, as a fraction of the threshold.
THRESHOLD_TOLERANCE = 0.25
#: A direction's minimal effect of interest on a correlation.
MIN_CORRELATION = 0.3
_R = 1.0 - 1e-12


@dataclass(frozen=True)
class Scale:
    """A t interval on its own scale: centre, half-width, units k (named ``unit``), df ν, the map
    from the statistic's values to the scale, and its confidence γ."""

    name: str
    centre: float
    half: float
    k: int
    dof: float
    to: object
    confidence: float
    unit: str = "units"

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


def _abs_atanh(v: float) -> float:
    return _atanh(math.sqrt(max(v, 0.0)))


def _unit(method: str) -> str:
    """The units an interval is over, from its method (``t interval over 5 slices`` → slices)."""
    m = re.search(r"over (\d+) ([a-z]+)", method)
    return m.group(2) if m else "seeds" if "jackknife" in method else "units"


def t_scale(iv) -> Scale | None:
    """The scale an interval (:class:`villani.statistics.intervals.Interval`) is a symmetric t interval on, from its
    method; ``None`` for exact, Clopper–Pearson, per-unit hulls and intervals not given."""
    if iv is None or iv.low is None or iv.high is None or not iv.dof or iv.units < 2:
        return None
    m = iv.method
    if m.startswith("exact") or "Clopper" in m or "per unit" in m:
        return None
    if "squared" in m:
        if iv.low <= 0:
            return None  # the r interval straddles 0: its squared image has lost one end
        to, name = _abs_atanh, "Fisher z of |r|"
    elif "Fisher z" in m:
        to, name = _atanh, "Fisher z"
    elif "by exp" in m or "of ln values" in m:  # a t interval of logs, back-transformed
        to, name = _log, "log"
    else:
        to, name = float, "raw"
    lo, hi = to(iv.low), to(iv.high)
    return Scale(name, (lo + hi) / 2, (hi - lo) / 2, int(iv.units), float(iv.dof), to, float(iv.confidence),
                 _unit(m))


def _mapped(sc: Scale, v: float) -> float | None:
    try:
        out = sc.to(v)
    except (ValueError, OverflowError):
        return None
    return float(out) if math.isfinite(out) else None


def min_effect(region: Region, sc: Scale) -> tuple[float | None, tuple[float, ...], str]:
    """(δ on the scale, the distances from the centre to the ends for a two-ended region — empty
    otherwise — and where δ comes from); δ is ``None`` where the region states no size (module
    docstring)."""
    ends = [v for v in (region.low, region.high) if math.isfinite(v)]
    if len(ends) == 2:
        lo, hi = _mapped(sc, region.low), _mapped(sc, region.high)
        if lo is None or hi is None:
            return None, (), "the region's ends do not map to the interval's scale"
        centre = _mapped(sc, (region.low + region.high) / 2)
        d = (centre - lo, hi - centre)
        return min(d), d, f"the region's own tolerance ({region.text}): centre to nearer end"
    if not ends:
        return None, (), "the region has no finite end"
    b = ends[0]
    if b != 0:
        mb = _mapped(sc, b)
        sides = [_mapped(sc, b * (1 + s * THRESHOLD_TOLERANCE)) for s in (-1, 1)]
        dist = [abs(x - mb) for x in sides if x is not None and mb is not None]
        if not dist:
            return None, (), "the threshold does not map to the interval's scale"
        return min(dist), (), f"{100 * THRESHOLD_TOLERANCE:g} % of the threshold {b:g}"
    if sc.name.startswith("Fisher z"):
        return _atanh(MIN_CORRELATION), (), f"a correlation of {MIN_CORRELATION:g} (the claim states a sign)"
    return None, (), "the claim states a sign and no size on this scale: no minimal effect to plan for"


def _t(n: int, confidence: float) -> float:
    return float(_sps.t.ppf((1 + confidence) / 2, n - 1))


def p_outside(n: int, delta: float, sd: float, confidence: float = 0.95) -> float:
    """P(the t interval of n units clears a boundary δ from the truth) = P(T′ > t), T′ noncentral t."""
    return float(_sps.nct.sf(_t(n, confidence), n - 1, delta * math.sqrt(n) / sd))


def p_inside(n: int, d1: float, d2: float, sd: float, confidence: float = 0.95) -> float:
    """P(the t interval of n units lies inside (m − d₁, m + d₂) when the truth is m) — over the
    sampling distribution of the SD (module docstring)."""
    df, t, root_n = n - 1, _t(n, confidence), math.sqrt(n)
    x_max = ((d1 + d2) / 2 * root_n / (t * sd)) ** 2 * df  # beyond it the interval is wider than the region
    if x_max <= 0:
        return 0.0

    def given(x: float) -> float:
        h = t * sd * math.sqrt(x / df) / root_n
        return max(0.0, float(_sps.norm.cdf((d2 - h) * root_n / sd) - _sps.norm.cdf((h - d1) * root_n / sd)))

    spread = 12.0 * math.sqrt(2.0 * df)
    lo, hi = max(0.0, df - spread), min(x_max, df + spread)
    if hi <= lo:
        return 0.0
    val, _ = _integrate.quad(lambda x: given(x) * _sps.chi2.pdf(x, df), lo, hi, limit=200)
    return float(min(1.0, val))


def _smallest(ok) -> int | str:
    """The smallest n ≥ 2 with ``ok(n)`` (monotone in n), by bisection; ``">1e+06"`` beyond."""
    if not ok(MAX_SEEDS):
        return f">{MAX_SEEDS:.0e}"
    lo, hi = 2, MAX_SEEDS
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def seeds_to_decide(delta: float, sd: float, confidence: float = 0.95, *, inside: tuple[float, ...] = (),
                    power: float = POWER) -> int | str:
    """The smallest n ≥ 2 at which the truth δ from the boundary (either side) — and, for a two-ended
    region with ``inside`` = (d₁, d₂), the truth at its centre — is decided with probability ≥ ``power``."""
    if not (delta > 0 and sd > 0):
        raise ValueError(f"a power plan needs δ > 0 and sd > 0, got δ = {delta}, sd = {sd}")
    n = _smallest(lambda k: p_outside(k, delta, sd, confidence) >= power)
    if inside and isinstance(n, int):
        m = _smallest(lambda k: p_inside(k, inside[0], inside[1], sd, confidence) >= power)
        n = m if not isinstance(m, int) else max(n, m)
    return n


def plan(iv, region: Region) -> dict:
    """The power columns of one row: ``seed_sd`` (on the interval's scale, named), ``min_effect``
    (δ on that scale), ``seeds_to_decide`` (units, named in the note); empty where the interval is
    not a t interval over units or the region states no size (the reason in ``power_note``)."""
    sc = t_scale(iv)
    empty = {"seed_sd": None, "sd_scale": "", "min_effect": None, "seeds_to_decide": ""}
    if sc is None:
        why = ("no interval" if iv is None or iv.low is None else "not a t interval over units (exact, a count, or "
               "a hull of per-unit intervals, or an R² whose r straddles 0)")
        return {**empty, "power_note": why}
    delta, inside, source = min_effect(region, sc)
    if delta is None or not sc.sd > 0:
        return {**empty, "seed_sd": sc.sd, "sd_scale": sc.name, "power_note": source if delta is None
                else "units that do not vary"}
    n = seeds_to_decide(delta, sc.sd, sc.confidence, inside=inside)
    return {"seed_sd": sc.sd, "sd_scale": sc.name, "min_effect": delta, "seeds_to_decide": n,
            "power_note": f"{sc.unit} to decide with probability {POWER:g} a truth δ = {delta:.3g} from the "
                          f"boundary on the {sc.name} scale ({source}), between-{sc.unit[:-1]} SD {sc.sd:.3g}; "
                          f"{sc.k} {sc.unit} now"}


def _paired(lo: pd.DataFrame, hi: pd.DataFrame) -> dict:
    """The per-seed difference hi − lo of final validation perplexity: its SD and t interval."""
    d = (hi.set_index("seed")["val_ppl"] - lo.set_index("seed")["val_ppl"]).dropna()
    if len(d) < 2:
        return {"paired_sd_val_ppl": None, "paired_ci_val_ppl": None, "paired_seeds": int(len(d))}
    iv = seed_interval(d.to_numpy())
    return {"paired_sd_val_ppl": float(d.std(ddof=1)), "paired_seeds": int(len(d)),
            "paired_ci_val_ppl": None if iv.low is None else [float(iv.low), float(iv.high)]}


def treatment(m: pd.DataFrame, variant: str, lams, learned: bool = True) -> Mapping:
    """Between the λ extremes of ``lams`` for ``variant`` (one λ > 0: against λ = 0): relative change
    of ‖θ‖² and change of validation perplexity at the last checkpoint (means over seeds), the
    between-seed SD of that perplexity (mean of the two λ's), and the paired contrast
    (:func:`_paired`). Empty when there are not two λ."""
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
    return {"lam_low": float(have[0]), "lam_high": float(have[-1]), "delta_theta_sq_rel": float(theta),
            "delta_val_ppl": dp, "seed_sd_val_ppl": sd_ppl,
            "lambda_visible": None if sd_ppl is None else bool(abs(dp) >= sd_ppl), **_paired(lo, hi)}
