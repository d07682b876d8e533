r"""``villani claims``: one row per quantitative claim of the paper's Sec. VI and appendices,
with our statistic, its confidence interval and a verdict — ``results/claims/{dataset}.csv``
(the text) and ``results/claims/{dataset}.json`` (the same rows with every number and the
intervals' methods).

Every claim is a :class:`Claim`: the paper's statement and number, the statistic we
compute, the *region* of that statistic the claim asserts (fixed here, before the data,
and listed in ``docs/claims.md``), and a function of the results that returns the
statistic's :class:`~villani.stats.Interval` and where it was measured. The verdict is
:func:`villani.claims.verdict.verdict` of the interval and the region: supported when the
interval lies inside the region, refuted when it lies outside, inconclusive otherwise or
when the statistic cannot be computed (the row says why).

**Which λ.** The paper's λ values (0, 1e-4, 1e-3, 1e-2) are not those of every parameter
set (the embedded default has 0, 0.1, 1, scaled so that λ·η·T spans the paper's range).
A claim about the paper's λ = 0 is measured at λ = 0, its "strong" λ = 1e-2 at our
largest λ, its "weak" λ (1e-4) at our smallest positive λ, and its λ = 1e-3 at
:func:`villani.figures.style.middle_lam`; every row states the λ it used. Fig 2's rays are
at the paper's own λ values (``rays.lambdas``).

**Intervals.** Correlations and means over checkpoints use a two-stage bootstrap
(:func:`villani.stats.bootstrap_interval`): runs (seeds) within each λ, then checkpoints
within a run — checkpoints of one run are not independent. A claim about *every*
checkpoint ("the envelope holds", "all distributions pass p > 0.3") is a count over our
checkpoints: its interval is exact, not sampled (for the envelope, its ends are the counts
that F* ∈ [0, lowest F] allows).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from villani.bounds.theory import F_STAR_LOWER, envelope_terms
from villani.claims.verdict import CODES, INCONCLUSIVE, Region, verdict
from villani.figures.radial_rays import ray_slope_interval
from villani.figures.style import middle_lam
from villani.io import atomic
from villani.io.results import (
    bounds_frame,
    landscape_surface,
    measurements,
    rays_table,
    trace_samples,
    training_log,
)
from villani.plan import layout
from villani.plan.runs import Run, runs
from villani.plan.schedule import checkpoint_steps
from villani.psi import psi_column
from villani.stats import (
    Interval,
    bootstrap_interval,
    correlation_interval,
    mean_interval,
    pearson_r,
    shapiro_p,
    spearman_rho,
)

__all__ = ["Claim", "Measured", "CLAIMS", "claim_rows", "write_claims", "paper_lambdas"]


@dataclass(frozen=True)
class Measured:
    """What a claim's computation returns: the interval (``None``: no statistic), where it
    was measured, and a note (the reason when there is no statistic, caveats otherwise)."""

    interval: Interval | None
    measured_on: str
    note: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """A quantitative claim of the paper and how it is tested."""

    id: str
    source: str
    statement: str
    paper_value: str
    statistic: str
    region: Region
    compute: Callable[["Context"], Measured]


class Context:
    """The results a ledger reads, loaded once (measurements of every variant, bounds, rays,
    landscapes, training logs, trace samples) and the bootstrap settings."""

    def __init__(self, params: Mapping, root):
        self.params, self.root = params, root
        c = params["claims"]
        self.confidence, self.n_boot, self.seed = float(c["confidence"]), int(c["bootstrap"]), int(c["seed"])
        self.dataset = params["data"]["name"]
        self.s = float(params["measure"]["s_values"][0])
        self.psi = psi_column(self.s)
        self._m: pd.DataFrame | None = None
        self._b: pd.DataFrame | None = None

    @property
    def m(self) -> pd.DataFrame:
        if self._m is None:
            self._m = measurements(self.params, self.root, variants=None)
        return self._m

    @property
    def b(self) -> pd.DataFrame:
        if self._b is None:
            self._b = bounds_frame(self.params, self.root)
        return self._b

    def boot(self, statistic, n, *, strata=None, clusters=None) -> Interval:
        return bootstrap_interval(statistic, n, strata=strata, clusters=clusters, n_boot=self.n_boot,
                                  confidence=self.confidence, seed=self.seed)

    def where(self, variant: str, lams, n_rows: int | None = None, extra: str = "") -> str:
        lam_text = ", ".join(f"{float(x):g}" for x in lams)
        seeds = ", ".join(map(str, self.params["train"]["seeds"]))
        rows = f", {n_rows} checkpoints" if n_rows is not None else ""
        return f"{self.dataset}, {variant}, λ = {lam_text}, seeds {seeds}{rows}{extra}"


def paper_lambdas(lambdas) -> dict[str, float | None]:
    """Our λ for each of the paper's: ``zero`` (0), ``weak`` (1e-4: smallest positive),
    ``middle`` (1e-3: :func:`~villani.figures.style.middle_lam`), ``strong`` (1e-2: largest);
    ``None`` where we have none."""
    lams = sorted(float(x) for x in lambdas)
    pos = [x for x in lams if x > 0]
    return {"zero": 0.0 if 0.0 in lams else None, "weak": pos[0] if pos else None,
            "middle": middle_lam(lams) if pos else None, "strong": pos[-1] if pos else None}


def _exact(value: float | None, low: float | None = None, high: float | None = None, n: int = 0,
           method: str = "exact: a count over every checkpoint (no sampling unit)") -> Interval:
    lo = value if low is None else low
    hi = value if high is None else high
    return Interval(value, lo, hi, 1.0, n, n, 0, method)


def _run_codes(df: pd.DataFrame) -> np.ndarray:
    return pd.factorize(df["variant"].astype(str) + "/" + df["lam"].astype(str) + "/" + df["seed"].astype(str))[0]


def _lam_codes(df: pd.DataFrame) -> np.ndarray:
    return pd.factorize(df["variant"].astype(str) + "/" + df["lam"].astype(str))[0]


def _none(reason: str, where: str) -> Measured:
    return Measured(None, where, reason)


# --------------------------------------------------------------------------- Fig 2


def _rays(ctx: Context) -> tuple[pd.DataFrame, dict] | None:
    try:
        return rays_table(ctx.params, ctx.root)
    except ValueError:
        return None


def _ray_slope_interval(ctx: Context, lam: float, s: float) -> tuple[Interval | None, pd.DataFrame]:
    got = _rays(ctx)
    if got is None:
        return None, pd.DataFrame()
    fits = pd.DataFrame([f for f in got[1].get("fits", []) if float(f["s"]) == s and float(f["lam"]) == lam])
    if fits.empty:
        return None, fits
    return ray_slope_interval(fits, n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed), fits


def fig2_saturation(ctx: Context) -> Measured:
    """λ = 0: how much Ψ_s still changes over the largest radii of a ray, relative to its size
    there — |ΔΨ_s| / mean |Ψ_s| over the fitted radii (``relative_change`` of slopes.json),
    mean over the random rays; a saturated field changes by little (≈ 0), a field that
    grows linearly in ‖θ‖² over that decade by about 1.6. The interval resamples the rays
    and redraws each change from its Hutchinson error (the slope's, times the fitted span)."""
    where = ctx.where("random rays", [0.0], extra=f", the {ctx.params['rays']['fit_points']} largest radii")
    if 0.0 not in [float(x) for x in ctx.params["rays"]["lambdas"]]:
        return _none("rays.lambdas has no λ = 0", where)
    _, fits = _ray_slope_interval(ctx, 0.0, ctx.s)
    rnd = fits[fits["kind"] == "random"] if len(fits) else fits
    if rnd.empty or "relative_change" not in rnd:
        return _none("no ray fits at λ = 0 (rays stage not run?)", where)
    span = (rnd["theta_sq_max"] - rnd["theta_sq_min"]).to_numpy(float)
    rel = rnd["relative_change"].to_numpy(float)
    change = rnd["psi_change_over_fit"].abs().to_numpy(float)
    mean_abs_psi = np.divide(change, np.abs(rel), out=np.full_like(rel, np.inf), where=rel != 0)
    se = rnd["slope_stderr_from_trace"].fillna(0.0).to_numpy(float) * span / mean_abs_psi
    iv = mean_interval(rel, se, n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed, absolute=True)
    per_ray = ", ".join(f"{x:.3g}" for x in rel)
    return Measured(iv, where, f"per ray {per_ray}; |Ψ_s| grows from {rnd_abs(ctx, 'min')} at the smallest radius to "
                    f"{rnd_abs(ctx, 'max')} at the largest (mean over rays); every coordinate of θ moves along a ray "
                    "(embeddings, LayerNorm gains, output layer), so ‖∇L‖² and tr ∇²L change with ‖θ‖² at λ = 0 too")


def rnd_abs(ctx: Context, end: str) -> str:
    """Mean |Ψ_s| at λ = 0 over the random rays at the smallest (``min``) or largest (``max``) radius."""
    got = _rays(ctx)
    if got is None:
        return "n/a"
    df = got[0]
    d = df[(df["lam"] == 0.0) & (df["kind"] == "random")]
    x = d["theta_sq"].min() if end == "min" else d["theta_sq"].max()
    return f"{d[d['theta_sq'] == x][ctx.psi].abs().mean():.3g}"


def fig2_slope(ctx: Context) -> Measured:
    """λ = 1e-2: the fitted slope of Ψ_s vs ‖θ‖² over the random rays divided by λ²/s."""
    lam, s = 0.01, ctx.s
    where = ctx.where("random rays", [lam], extra=f", fit over the {ctx.params['rays']['fit_points']} largest radii")
    if lam not in [float(x) for x in ctx.params["rays"]["lambdas"]]:
        return _none("rays.lambdas has no λ = 0.01", where)
    iv, fits = _ray_slope_interval(ctx, lam, s)
    if iv is None:
        return _none("no ray fits at λ = 0.01 (rays stage not run?)", where)
    ref = lam**2 / s
    dominant = fits["dominant_part"].mode().iloc[0] if "dominant_part" in fits else "?"
    scaled = Interval(iv.estimate / ref, iv.low / ref, iv.high / ref, iv.confidence, iv.n, iv.units, iv.n_valid,
                      iv.method + f"; divided by λ²/s = {ref:g}")
    return Measured(scaled, where, f"slope {iv.estimate:.3g} [{iv.low:.3g}, {iv.high:.3g}] vs λ²/s = {ref:g} and "
                    f"Lemma 4's λ²/(2s) = {ref / 2:g}; largest part of the fitted slope: {dominant}")


# --------------------------------------------------------------------------- Fig 3


def _quadratic_isotropy(df: pd.DataFrame) -> float | None:
    """λ_min/λ_max of the 2×2 Hessian of F ≈ c + g·(a, b) + ½(a, b)A(a, b)ᵀ fitted to the grid
    points (least squares); ≤ 0 when the fitted surface is not a bowl (a saddle or a valley)."""
    a, b, f = (df[c].to_numpy(float) for c in ("a", "b", "F"))
    X = np.column_stack([np.ones_like(a), a, b, 0.5 * a * a, a * b, 0.5 * b * b])
    if len(np.unique(a)) < 3 or len(np.unique(b)) < 3:
        return None
    coef, *_ = np.linalg.lstsq(X, f, rcond=None)
    A = np.array([[coef[3], coef[4]], [coef[4], coef[5]]])
    ev = np.linalg.eigvalsh(A)
    if ev[1] <= 0:
        return None
    return float(ev[0] / ev[1])


def _landscapes(ctx: Context) -> dict[float, pd.DataFrame]:
    out = {}
    for lam in ctx.params["landscape"]["lambdas"]:
        try:
            out[float(lam)] = landscape_surface(ctx.params, float(lam), ctx.root)[0]
        except ValueError:
            pass
    return out


def fig3_bowl(ctx: Context) -> Measured:
    """λ > 0 (the largest of landscape.lambdas): isotropy λ_min/λ_max of the fitted quadratic."""
    surf = _landscapes(ctx)
    pos = sorted(x for x in surf if x > 0)
    where = ctx.where("landscape slice", pos[-1:], extra=", one random 2-D slice, grid points")
    if not pos:
        return _none("no landscape at λ > 0", where)
    df = surf[pos[-1]]
    iv = ctx.boot(lambda i: _quadratic_isotropy(df.iloc[i]), len(df))
    return Measured(iv, where, "the interval resamples the grid points of one slice; another pair of random "
                    "directions is a different slice")


def fig3_valley_to_bowl(ctx: Context) -> Measured:
    """Isotropy at the largest λ > 0 minus isotropy at λ = 0 (valley → bowl: > 0)."""
    surf = _landscapes(ctx)
    pos = sorted(x for x in surf if x > 0)
    where = ctx.where("landscape slice", ([0.0] if 0.0 in surf else []) + pos[-1:], extra=", one random slice each")
    if 0.0 not in surf or not pos:
        return _none("landscape.lambdas needs λ = 0 and a λ > 0", where)
    d0, d1 = surf[0.0], surf[pos[-1]]
    both = pd.concat([d0.assign(_g=0), d1.assign(_g=1)], ignore_index=True)

    def stat(i):
        sub = both.iloc[i]
        q1 = _quadratic_isotropy(sub[sub["_g"] == 1])
        q0 = _quadratic_isotropy(sub[sub["_g"] == 0])
        if q1 is None:
            return None
        return q1 - (0.0 if q0 is None else q0)  # λ = 0 not a bowl: isotropy counted as 0

    iv = ctx.boot(stat, len(both), strata=both["_g"].to_numpy())
    q0 = _quadratic_isotropy(d0)
    return Measured(iv, where, f"isotropy at λ = 0: {'not a bowl (counted as 0)' if q0 is None else f'{q0:.3g}'}; "
                    "grid points resampled per slice")


# --------------------------------------------------------------------------- Fig 4


def fig4_lammax_exponent(ctx: Context) -> Measured:
    """Exponent b of λ_max ∝ (λ‖θ‖)^b over every checkpoint of the AdamW runs with λ > 0."""
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] > 0)].dropna(subset=["lambda_max"]).reset_index(drop=True)
    where = ctx.where("adamw", sorted(m["lam"].unique()), len(m))
    if len(m) < 3:
        return _none("fewer than 3 checkpoints with λ > 0", where)
    x = np.log10(m["lam"].to_numpy(float) * np.sqrt(m["theta_sq_norm"].to_numpy(float)))
    y = np.log10(m["lambda_max"].to_numpy(float))

    def stat(i):
        if np.ptp(x[i]) == 0:
            return None
        return float(np.polyfit(x[i], y[i], 1)[0])

    iv = ctx.boot(stat, len(m), strata=_lam_codes(m), clusters=_run_codes(m))
    within = {f"{lam:g}": stat(np.flatnonzero(m["lam"].to_numpy() == lam)) for lam in sorted(m["lam"].unique())}
    return Measured(iv, where, "∇²F = ∇²L + λI, so μ_max(F) = μ_max(L) + λ; exponent within each λ (vs ‖θ‖): "
                    + ", ".join(f"λ = {k}: {v:.3g}" if v is not None else f"λ = {k}: n/a" for k, v in within.items()))


def fig4_ratio_rises(ctx: Context) -> Measured:
    """Spearman ρ(λ, λ_max/λ_median) over every checkpoint of the AdamW runs with λ > 0."""
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] > 0)].dropna(subset=["spectral_ratio"]).reset_index(
        drop=True)
    lams = sorted(m["lam"].unique())
    where = ctx.where("adamw", lams, len(m))
    if len(lams) < 2:
        return _none("needs two λ > 0 with a defined ratio (λ_median > 0)", where)
    lam, ratio = m["lam"].to_numpy(float), m["spectral_ratio"].to_numpy(float)
    iv = ctx.boot(lambda i: spearman_rho(lam[i], ratio[i]), len(m), strata=_lam_codes(m), clusters=_run_codes(m))
    med = ", ".join(f"λ = {x:g}: {np.median(ratio[lam == x]):.3g}" for x in lams)
    return Measured(iv, where, f"median ratio {med}; μ_median of ∇²F = ∇²L + λI is ≈ λ when the bulk of ∇²L is "
                    f"near 0, so the ratio ≈ μ_max/λ falls with λ; Pearson r = {_fmt(pearson_r(lam, ratio))}")


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


# --------------------------------------------------------------------------- Fig 5


def _t90(log: pd.DataFrame, window: int) -> float | None:
    """First step at which the smoothed training loss has made 90% of its drop (start → lowest)."""
    sm = log["loss"].rolling(window, center=True, min_periods=1).mean().to_numpy(float)
    steps = log["step"].to_numpy(float)
    drop = sm[0] - sm.min()
    if not drop > 0:
        return None
    hit = np.flatnonzero(sm <= sm[0] - 0.9 * drop)
    return float(steps[hit[0]]) if hit.size else None


def fig5_faster_with_lam(ctx: Context) -> Measured:
    """Spearman ρ(λ, t₉₀) over the AdamW runs, t₉₀ the step at which a run's smoothed training
    loss has made 90% of its own drop; faster convergence with λ is ρ < 0."""
    window = max(1, int(ctx.params["train"]["steps"]) // 40)
    rows = []
    for r in runs(ctx.params, ("adamw",)):
        rows.append({"lam": r.lam, "seed": r.seed, "t90": _t90(training_log(ctx.params, r, ctx.root), window)})
    df = pd.DataFrame(rows).dropna().reset_index(drop=True)
    where = ctx.where("adamw", sorted(df["lam"].unique()), extra=f", {len(df)} runs (one t₉₀ each)")
    if df["lam"].nunique() < 2:
        return _none("needs two λ", where)
    lam, t90 = df["lam"].to_numpy(float), df["t90"].to_numpy(float)
    iv = ctx.boot(lambda i: spearman_rho(lam[i], t90[i]), len(df), strata=pd.factorize(df["lam"])[0])
    mean = ", ".join(f"λ = {x:g}: {t90[lam == x].mean():.0f}" for x in sorted(set(lam)))
    return Measured(iv, where, f"mean t₉₀ (steps) {mean}; runs resampled within each λ")


def _envelope_rows(ctx: Context) -> pd.DataFrame:
    b = ctx.b
    return b[(b["status"] == "ok")].reset_index(drop=True)


def fig5_envelope_holds(ctx: Context) -> Measured:
    """Fraction of the checkpoints, among those where eq. (41)'s hypotheses hold, at which the
    printed envelope holds; the interval's ends are the counts F* ∈ [0, lowest F] allows."""
    b = _envelope_rows(ctx)
    ok = b[b["envelope_status"] == "ok"]
    lams = sorted(ok["lam"].unique()) if len(ok) else []
    variants = sorted(ok["variant"].unique()) if len(ok) else []
    where = ctx.where(", ".join(variants) or "no run", lams, len(ok))
    if ok.empty:
        fails = _failed_text(b, "envelope")
        return _none(f"the envelope's hypotheses fail at every checkpoint ({fails})", where)
    n = len(ok)
    holds = int((ok["envelope_check"] == "holds").sum())
    violated = int((ok["envelope_check"] == "violated").sum())
    iv = _exact(holds / n if holds + violated == n else None, holds / n, (n - violated) / n, n,
                "exact count over the checkpoints; ends: F* = lowest F (undetermined ones fail) and F* = 0")
    rho = [2 * float(r.eta) / (float(r.lam) * float(r.c_ls)) for r in ok.itertuples()]
    return Measured(iv, where, f"holds at {holds}, violated at {violated}, undetermined at {n - holds - violated} "
                    f"of {n}; the contraction per step is 1 − {max(rho):.2g}, so over the run the envelope stays "
                    f"≈ F₀ + ηLσ²/4; at the other checkpoints with λ > 0: {_failed_text(b, 'envelope')}")


def fig5_envelope_tight(ctx: Context) -> Measured:
    """(F(θ_T) − F*)/envelope(T) at the last checkpoint where eq. (41)'s hypotheses hold, for
    F* between 0 and the run's lowest F and every seed: 1 = the envelope is reached."""
    b = _envelope_rows(ctx)
    ok = b[b["envelope_status"] == "ok"]
    where = ctx.where(", ".join(sorted(ok["variant"].unique())) or "no run", sorted(ok["lam"].unique()))
    if ok.empty:
        return _none(f"the envelope's hypotheses fail at every checkpoint ({_failed_text(b, 'envelope')})", where)
    last = ok.sort_values("step").groupby(["variant", "lam", "seed"]).tail(1)
    ratios = []
    for r in last.itertuples():
        factor, noise = envelope_terms([float(r.step)], float(r.c_ls), float(r.eta), float(r.smoothness_L),
                                       float(r.sigma_sq), float(r.lam), form="paper")
        for f_star in (F_STAR_LOWER, float(r.f_min_ckpt)):
            e = float(factor[0]) * (float(r.f0) - f_star) + noise
            if e > 0:
                ratios.append((float(r.F) - f_star) / e)
    if not ratios:
        return _none("no envelope value", where)
    iv = _exact(float(np.median(ratios)), float(min(ratios)), float(max(ratios)), len(last),
                "range over seeds and F* ∈ [0, lowest F] (not sampled)")
    return Measured(iv, where + f", step {int(last['step'].max())}", "the envelope is flat when 2η/C_LS(βF) ≈ 0 "
                    "(C_LS ∝ d/λ²): it cannot follow an exponential decay")


def _failed_text(b: pd.DataFrame, family: str) -> str:
    from villani.bounds.table import FAMILIES, HYPOTHESES

    parts = []
    for h in FAMILIES[family]:
        col = f"hyp_{h}"
        if col in b:
            k = int((b[col].astype(object) == False).sum())  # noqa: E712 (False, not None)
            if k:
                parts.append(f"{HYPOTHESES[h]} fails at {k}/{len(b)}")
    return "; ".join(parts) or "none fail"


# --------------------------------------------------------------------------- Fig 6


def _pac_bayes(ctx: Context, which: str) -> Measured:
    lam = paper_lambdas(ctx.params["train"]["lambdas"])[which]
    b = ctx.b
    b = b[(b["variant"] == "adamw") & (b["lam"] == lam)] if lam is not None else b.iloc[0:0]
    ok = b[b["pac_bayes_status"] == "ok"].reset_index(drop=True)
    where = ctx.where("adamw", [lam] if lam is not None else [], len(b))
    if lam is None or b.empty:
        return _none(f"no {which} λ", where)
    if len(ok) < 2:
        return _none(f"the bound's hypotheses hold at {len(ok)} of {len(b)} checkpoints "
                     f"({_failed_text(b, 'pac_bayes')}): no bound to compare", where)
    x, y = ok["val_ppl"].to_numpy(float), ok["pb_ppl_bound"].to_numpy(float)
    iv = ctx.boot(lambda i: float(np.mean(y[i] / x[i])), len(ok), clusters=_run_codes(ok))
    return Measured(iv, where, f"over the {len(ok)} checkpoints where the hypotheses hold")


def fig6_ratio_weak(ctx: Context) -> Measured:
    return _pac_bayes(ctx, "weak")


def fig6_ratio_strong(ctx: Context) -> Measured:
    return _pac_bayes(ctx, "strong")


def fig6_r2(ctx: Context) -> Measured:
    b = ctx.b
    b = b[(b["variant"] == "adamw") & (b["status"] == "ok")]
    ok = b[b["pac_bayes_status"] == "ok"].reset_index(drop=True)
    where = ctx.where("adamw", sorted(b["lam"].unique()), len(b))
    if len(ok) < 3:
        return _none(f"the bound's hypotheses hold at {len(ok)} of {len(b)} checkpoints "
                     f"({_failed_text(b, 'pac_bayes')}): no bound to correlate", where)
    x, y = ok["val_ppl"].to_numpy(float), ok["pb_ppl_bound"].to_numpy(float)

    def stat(i):
        r = pearson_r(x[i], y[i])
        return None if r is None else r * r

    iv = ctx.boot(stat, len(ok), strata=_lam_codes(ok), clusters=_run_codes(ok))
    return Measured(iv, where, f"Pearson r = {_fmt(pearson_r(x, y))}")


# --------------------------------------------------------------------------- Fig 7


def _psi_corr(ctx: Context, variant: str, lam: float, kind: str = "spearman") -> tuple[Interval | None, str, str]:
    m = ctx.m[(ctx.m["variant"] == variant) & (ctx.m["lam"] == lam)].dropna(subset=[ctx.psi, "val_ppl"])
    m = m.reset_index(drop=True)
    where = ctx.where(variant, [lam], len(m))
    if len(m) < 3:
        return None, where, f"{len(m)} checkpoints"
    x, y = m[ctx.psi].to_numpy(float), m["val_ppl"].to_numpy(float)
    iv = correlation_interval(x, y, _run_codes(m), kind=kind, n_boot=ctx.n_boot, confidence=ctx.confidence,
                              seed=ctx.seed)
    note = f"Pearson r = {_fmt(pearson_r(x, y))}, Spearman ρ = {_fmt(spearman_rho(x, y))}"
    return iv, where, note


def _fig7_direction(variant: str, lam: float) -> Callable[[Context], Measured]:
    def compute(ctx: Context) -> Measured:
        iv, where, note = _psi_corr(ctx, variant, lam)
        if iv is None:
            return _none(f"too few checkpoints ({note})", where)
        return Measured(iv, where, note + "; Ψ_s = −(tr ∇²L + λd) + ‖∇F‖²/s: within one λ, λd is a constant")
    return compute


def _fig7_r2(which: str) -> Callable[[Context], Measured]:
    def compute(ctx: Context) -> Measured:
        lam = paper_lambdas(ctx.params["train"]["lambdas"])[which]
        if lam is None:
            return _none(f"no {which} λ", ctx.where("adamw", []))
        iv, where, note = _psi_corr(ctx, "adamw", lam, kind="r2")
        if iv is None:
            return _none(f"too few checkpoints ({note})", where)
        return Measured(iv, where, note + " — R² alone hides the sign")
    return compute


def fig7_r2_increases(ctx: Context) -> Measured:
    pl = paper_lambdas(ctx.params["train"]["lambdas"])
    lo, hi = pl["zero"], pl["strong"]
    m = ctx.m[(ctx.m["variant"] == "adamw") & ctx.m["lam"].isin([lo, hi])].dropna(subset=[ctx.psi, "val_ppl"])
    m = m.reset_index(drop=True)
    where = ctx.where("adamw", [x for x in (lo, hi) if x is not None], len(m))
    if lo is None or hi is None or m["lam"].nunique() < 2:
        return _none("needs λ = 0 and a λ > 0", where)
    x, y, lam = m[ctx.psi].to_numpy(float), m["val_ppl"].to_numpy(float), m["lam"].to_numpy(float)

    def stat(i):
        out = []
        for v in (hi, lo):
            j = i[lam[i] == v]
            r = pearson_r(x[j], y[j])
            if r is None:
                return None
            out.append(r * r)
        return out[0] - out[1]

    iv = ctx.boot(stat, len(m), strata=_lam_codes(m), clusters=_run_codes(m))
    return Measured(iv, where, f"R²(λ = {hi:g}) − R²(λ = 0)")


# --------------------------------------------------------------------------- Fig 8, 9, Table III, App. B


def _middle_runs(ctx: Context) -> tuple[float, list[Run]]:
    lam = paper_lambdas(ctx.params["train"]["lambdas"])["middle"]
    return lam, [r for r in runs(ctx.params, ("adamw",)) if r.lam == lam]


def _phase_steps(ctx: Context) -> dict[str, int]:
    steps = checkpoint_steps(ctx.params["train"])
    return {"early": steps[0], "middle": steps[len(steps) // 2], "late": steps[-1]}


def _fig8_cv(phase: str) -> Callable[[Context], Measured]:
    def compute(ctx: Context) -> Measured:
        lam, rs = _middle_runs(ctx)
        step = _phase_steps(ctx)[phase]
        where = ctx.where("adamw", [lam] if lam is not None else [], extra=f", step {step}")
        if lam is None or not rs:
            return _none("no λ > 0", where)
        frames = []
        for k, r in enumerate(rs):
            rec = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == lam) & (ctx.m["seed"] == r.seed)
                        & (ctx.m["step"] == step)]
            lam_d = float(rec["lam_d"].iloc[0])
            x = trace_samples(ctx.params, r, step, ctx.root)
            frames.append(pd.DataFrame({"run": k, "F": x + lam_d, "L": x}))
        df = pd.concat(frames, ignore_index=True)
        f_samples, run = df["F"].to_numpy(float), df["run"].to_numpy()

        def stat(i):
            cvs, w = [], []
            for k in np.unique(run[i]):
                v = f_samples[i][run[i] == k]
                if v.size < 2 or v.mean() == 0:
                    return None
                cvs.append(v.std(ddof=1) / abs(v.mean()))
                w.append(v.size)
            return float(np.average(cvs, weights=w))

        iv = ctx.boot(stat, len(df), clusters=run)
        cv_l = np.mean([g["L"].std(ddof=1) / abs(g["L"].mean()) for _, g in df.groupby("run")])
        return Measured(iv, where, f"CV of the ∇²F samples vᵀ∇²L v + λd (the paper's); of the ∇²L samples: "
                        f"{cv_l:.3g} — the exact shift λd shrinks the CV without any change in the estimate's "
                        "error; probes resampled within seeds")
    return compute


def fig8_shapiro(ctx: Context) -> Measured:
    lam, rs = _middle_runs(ctx)
    phases = _phase_steps(ctx)
    where = ctx.where("adamw", [lam] if lam is not None else [], extra=", early/middle/late checkpoints")
    if lam is None or not rs:
        return _none("no λ > 0", where)
    ps = [shapiro_p(trace_samples(ctx.params, r, step, ctx.root)) for r in rs for step in dict.fromkeys(phases.values())]
    ps = [p for p in ps if p is not None]
    if not ps:
        return _none("no Shapiro–Wilk p", where)
    k = sum(p > 0.3 for p in ps)
    return Measured(_exact(k / len(ps), n=len(ps)), where,
                    f"p = {', '.join(f'{p:.2g}' for p in ps)}; under exact normality p is uniform, so p > 0.3 "
                    "fails 30% of the time")


def _rel_error_F(m: pd.DataFrame) -> np.ndarray:
    return (m["trace_L_stderr"] / m["laplacian_F"].abs()).to_numpy(float)


def fig9_cv_formula(ctx: Context) -> Measured:
    """Measured relative error of the M-probe estimate of tr ∇²F over √(2d/M)."""
    lam = paper_lambdas(ctx.params["train"]["lambdas"])["middle"]
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == lam)].reset_index(drop=True)
    where = ctx.where("adamw", [lam] if lam is not None else [], len(m))
    if m.empty:
        return _none("no measurements", where)
    M = m["trace_L_num_probes"].to_numpy(float)
    pred = np.sqrt(2 * m["d"].to_numpy(float) / M)
    rel = _rel_error_F(m)
    iv = ctx.boot(lambda i: float(np.mean(rel[i] / pred[i])), len(m), clusters=_run_codes(m))
    return Measured(iv, where, f"√(2d/M) = {pred.mean():.3g} (d = {int(m['d'].iloc[0])}, M = {int(M[0])}) is "
                    f"not a CV; measured relative error {np.mean(rel):.3g}; the variance of a Rademacher "
                    "probe is 2(‖A‖_F² − Σ A_ii²) (docs/bounds.md)")


def fig9_cv_plateau(ctx: Context) -> Measured:
    """The relative error of the M-probe estimate of tr ∇²F over the later half of the
    checkpoints (Fig 9's "stable phase") at the paper's λ = 1e-3 (our middle λ)."""
    lam = paper_lambdas(ctx.params["train"]["lambdas"])["middle"]
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == lam)]
    steps = sorted(m["step"].unique())
    m = m[m["step"].isin(steps[len(steps) // 2:])].reset_index(drop=True)
    where = ctx.where("adamw", [lam] if lam is not None else [], len(m))
    if m.empty:
        return _none("no measurements", where)
    rel = _rel_error_F(m)
    iv = ctx.boot(lambda i: float(np.mean(rel[i])), len(m), clusters=_run_codes(m))
    rel_l = float(np.mean(m["trace_L_stderr"] / m["trace_L_mean"].abs()))
    return Measured(iv, where, f"stderr/|tr ∇²F| (tr ∇²F = tr ∇²L + λd); relative to |tr ∇²L|: {rel_l:.3g}")


def _table3_ratio(num: str, den: str | None) -> Callable[[Context], Measured]:
    """Mean tr ∇²F at the ``num`` λ over λd (``den`` None) or over the mean at the ``den`` λ."""
    def compute(ctx: Context) -> Measured:
        pl = paper_lambdas(ctx.params["train"]["lambdas"])
        lam_n, lam_d = pl[num], (pl[den] if den else None)
        m = ctx.m[ctx.m["variant"] == "adamw"]
        sel = m[m["lam"].isin([x for x in (lam_n, lam_d) if x is not None])].reset_index(drop=True)
        where = ctx.where("adamw", [x for x in (lam_n, lam_d) if x is not None], len(sel))
        if lam_n is None or (den and lam_d is None):
            return _none(f"no {num if lam_n is None else den} λ", where)
        tr, lam, lamd = sel["laplacian_F"].to_numpy(float), sel["lam"].to_numpy(float), sel["lam_d"].to_numpy(float)

        def stat(i):
            a = tr[i][lam[i] == lam_n]
            if den is None:
                return float(a.mean() / lamd[i][lam[i] == lam_n].mean()) if a.size else None
            b = tr[i][lam[i] == lam_d]
            return float(a.mean() / b.mean()) if a.size and b.size and b.mean() != 0 else None

        iv = ctx.boot(stat, len(sel), strata=_lam_codes(sel), clusters=_run_codes(sel))
        return Measured(iv, where, f"mean tr ∇²F over all checkpoints: λ = {lam_n:g}: {tr[lam == lam_n].mean():.4g}"
                        + (f", λ = {lam_d:g}: {tr[lam == lam_d].mean():.4g}" if den else
                           f", λd = {lamd[lam == lam_n].mean():.4g}"))
    return compute


# --------------------------------------------------------------------------- the claims


def _id_lam(lam: float) -> str:
    """λ in a claim id, without '.' (ids are metrics.json keys): 0.1 → 0p1, 1.0 → 1, 1e-4 → 1e-04."""
    return f"{float(lam):g}".replace(".", "p")


def _claims(params: Mapping) -> list[Claim]:
    pl = paper_lambdas(params["train"]["lambdas"])
    out = [
        Claim("fig2_lam0_saturates", "Fig 2, Sec. VI-C", "For λ = 0 the field Ψ_s saturates at a finite value",
              "Ψ_s stops changing at large ‖θ‖",
              "|ΔΨ_s| / mean |Ψ_s| over the largest radii of a ray, λ = 0, mean over the random rays",
              Region.at_most(0.1), fig2_saturation),
        Claim("fig2_slope_lam1e-2", "Fig 2, Sec. VI-C", "At λ = 10⁻² Ψ_s grows with slope ≈ λ²/s (eq. 19)",
              "slope / (λ²/s) = 1", "fitted slope of Ψ_s vs ‖θ‖² (largest radii, random rays) / (λ²/s), λ = 0.01",
              Region.around(1.0, 0.25, relative=True), fig2_slope),
        Claim("fig3_bowl", "Fig 3, Sec. VI-B", "With λ > 0 the landscape is a bowl with circular contours",
              "circular contours (isotropy ≈ 1)", "λ_min/λ_max of the quadratic fitted to F on the slice, largest λ",
              Region.at_least(0.8), fig3_bowl),
        Claim("fig3_valley_to_bowl", "Fig 3, Sec. VI-B", "λ = 0 is an elongated valley, λ > 0 a bowl",
              "isotropy rises from λ = 0 to λ > 0", "isotropy(largest λ) − isotropy(λ = 0)",
              Region.direction(+1), fig3_valley_to_bowl),
        Claim("fig4_lammax_linear", "Fig 4, Sec. VI-D", "The spectral radius grows linearly: λ_max ∝ λ‖θ‖",
              "exponent 1", "slope of log μ_max (largest eigenvalue of ∇²F) on log(λ‖θ‖), AdamW, λ > 0",
              Region.around(1.0, 0.2), fig4_lammax_exponent),
        Claim("fig4_ratio_rises_with_lam", "Fig 4, Sec. VI-D", "λ_max/λ_median increases with λ",
              "rises with λ", "Spearman ρ(λ, μ_max/μ_median) (eigenvalues μ of ∇²F), AdamW, λ > 0",
              Region.direction(+1), fig4_ratio_rises),
        Claim("fig5_faster_with_lam", "Fig 5, Sec. VI-E", "As λ increases, convergence accelerates",
              "faster with λ", "Spearman ρ(λ, t₉₀), t₉₀ = step where a run's smoothed loss made 90% of its drop",
              Region.direction(-1), fig5_faster_with_lam),
        Claim("fig5_envelope_holds", "Fig 5, Theorem 2, eq. 41",
              "The training curves lie under the eq. (41) envelope (an upper bound)", "holds at every checkpoint",
              "fraction of checkpoints (hypotheses holding) where eq. (41) as printed holds",
              Region(1.0, 1.0, text="= 1"), fig5_envelope_holds),
        Claim("fig5_envelope_tracks", "Fig 5, Sec. VI-E",
              "Empirical results align closely with the predicted exponential rate", "tight envelope",
              "(F(θ_T) − F*)/envelope(T) at the last checkpoint, eq. (41) as printed",
              Region(0.5, 1.0, text="in [0.5, 1]"), fig5_envelope_tight),
        Claim("fig6_ratio_weak", "Fig 6, Sec. VI-F", "Bound/perplexity ratio 1.43× under weak regularisation",
              "1.43", f"mean PAC-Bayes bound / validation perplexity, λ = {pl['weak']}",
              Region.around(1.43, 0.1, relative=True), fig6_ratio_weak),
        Claim("fig6_ratio_strong", "Fig 6, Sec. VI-F", "Bound/perplexity ratio 1.12× under strong regularisation",
              "1.12", f"mean PAC-Bayes bound / validation perplexity, λ = {pl['strong']}",
              Region.around(1.12, 0.1, relative=True), fig6_ratio_strong),
        Claim("fig6_r2", "Fig 6, Sec. VI-F", "R² ≈ 0.93 between the bound and validation perplexity", "0.93",
              "Pearson r² of bound and validation perplexity, λ > 0", Region.around(0.93, 0.05), fig6_r2),
    ]
    for lam in sorted(float(x) for x in params["train"]["lambdas"]):
        out.append(Claim(f"fig7_direction_adamw_lam{_id_lam(lam)}", "Fig 7, Sec. VI-G",
                         "Higher Ψ_s goes with lower validation perplexity", "negative association",
                         f"Spearman ρ(Ψ_s, validation perplexity), AdamW λ = {lam:g}",
                         Region.direction(-1), _fig7_direction("adamw", lam)))
    for lam in sorted(float(x) for x in params["train"]["langevin"]["lambdas"]):
        out.append(Claim(f"fig7_direction_langevin_lam{_id_lam(lam)}", "Fig 7, Sec. VI-G",
                         "Higher Ψ_s goes with lower validation perplexity (the theory's Langevin dynamics)",
                         "negative association", f"Spearman ρ(Ψ_s, validation perplexity), Langevin λ = {lam:g}",
                         Region.direction(-1), _fig7_direction("langevin", lam)))
    out += [
        Claim("fig7_r2_strong", "Fig 7, Sec. VI-G", "R² = 0.94 between Ψ_s and perplexity at λ = 10⁻²", "0.94",
              f"Pearson r² of Ψ_s and validation perplexity, λ = {pl['strong']}", Region.around(0.94, 0.05),
              _fig7_r2("strong")),
        Claim("fig7_r2_zero", "Fig 7, Sec. VI-G", "R² = 0.23 between Ψ_s and perplexity at λ = 0", "0.23",
              "Pearson r² of Ψ_s and validation perplexity, λ = 0", Region.around(0.23, 0.1), _fig7_r2("zero")),
        Claim("fig7_r2_rises_with_lam", "Fig 7, Sec. VI-G", "Correlation strength increases with λ",
              "R²(λ = 10⁻²) > R²(λ = 0)", f"R²(λ = {pl['strong']}) − R²(λ = 0)", Region.direction(+1),
              fig7_r2_increases),
        Claim("fig8_cv_early", "Fig 8", "CV of the trace samples 12.3% early in training", "0.123",
              f"CV of the M samples vᵀ∇²F v, first checkpoint, λ = {pl['middle']}",
              Region.around(0.123, 0.25, relative=True), _fig8_cv("early")),
        Claim("fig8_cv_middle", "Fig 8", "CV 4.9% mid-training", "0.049",
              f"CV of the M samples vᵀ∇²F v, middle checkpoint, λ = {pl['middle']}",
              Region.around(0.049, 0.25, relative=True), _fig8_cv("middle")),
        Claim("fig8_cv_late", "Fig 8", "CV 5.0% at the end", "0.050",
              f"CV of the M samples vᵀ∇²F v, last checkpoint, λ = {pl['middle']}",
              Region.around(0.050, 0.25, relative=True), _fig8_cv("late")),
        Claim("fig8_shapiro", "Fig 8", "All distributions pass normality tests (Shapiro–Wilk p > 0.3)",
              "every p > 0.3", f"fraction of early/middle/late checkpoints (all seeds) with p > 0.3, λ = {pl['middle']}",
              Region(1.0, 1.0, text="= 1"), fig8_shapiro),
        Claim("fig9_cv_sqrt_2d_over_M", "Fig 9, Sec. VI-H", "The CV stabilises around the prediction √(2d/M)",
              "CV / √(2d/M) = 1", "relative error of the M-probe estimate of tr ∇²F / √(2d/M)",
              Region.around(1.0, 0.25, relative=True), fig9_cv_formula),
        Claim("fig9_cv_plateau", "Fig 9, Sec. VI-H", "The CV plateaus near 4.9%", "0.049",
              f"relative error of the M-probe estimate of tr ∇²F, later half of the checkpoints, λ = {pl['middle']}",
              Region.around(0.049, 0.25, relative=True), fig9_cv_plateau),
        Claim("table3_trace_over_lam_d", "Table III", "Mean trace 58.4×10⁸ at λ = 10⁻², d = 1.25×10⁸",
              "tr ∇²F / (λd) = 4,672", f"mean tr ∇²F / (λd), λ = {pl['strong']}",
              Region.around(4672.0, 0.25, relative=True), _table3_ratio("strong", None)),
        Claim("table3_trace_ratio", "Table III", "Mean trace 58.4 (λ = 10⁻²) vs 1.74 (λ = 0), ×10⁸",
              "ratio 33.6", f"mean tr ∇²F at λ = {pl['strong']} / at λ = 0",
              Region.around(33.6, 0.25, relative=True), _table3_ratio("strong", "zero")),
        Claim("table3_rel_error_strong", "Table III", "Relative error 0.050 at λ = 10⁻²", "0.050",
              f"stderr / |tr ∇²F| of the M-probe estimate, λ = {pl['strong']}",
              Region.around(0.050, 0.25, relative=True), _rel_error_all("strong")),
        Claim("appB_error_below_3pct", "Appendix A-B/B", "M = 64 probes give < 3% error", "< 0.03",
              f"stderr / |tr ∇²F| scaled to M = 64, every checkpoint, λ = {pl['middle']}",
              Region.at_most(0.03, strict=True), _rel_error_all("middle", scale_to=64)),
    ]
    return out


def _rel_error_all(which: str, scale_to: int | None = None) -> Callable[[Context], Measured]:
    """The relative error over every checkpoint (Table III, App. B), optionally scaled to M = scale_to."""
    def compute(ctx: Context) -> Measured:
        lam = paper_lambdas(ctx.params["train"]["lambdas"])[which]
        m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == lam)].reset_index(drop=True)
        where = ctx.where("adamw", [lam] if lam is not None else [], len(m))
        if m.empty:
            return _none("no measurements", where)
        rel = _rel_error_F(m)
        M = int(m["trace_L_num_probes"].iloc[0])
        factor = 1.0 if scale_to is None else math.sqrt(M / scale_to)
        iv = ctx.boot(lambda i: float(np.mean(rel[i])) * factor, len(m), clusters=_run_codes(m))
        rel_l = float(np.mean(m["trace_L_stderr"] / m["trace_L_mean"].abs())) * factor
        scaled = "" if scale_to is None else f"; measured with M = {M}, scaled to M = {scale_to} by √({M}/{scale_to})"
        return Measured(iv, where, f"tr ∇²F = tr ∇²L + λd; relative to |tr ∇²L|: {rel_l:.3g}{scaled}")
    return compute


CLAIMS = _claims  # the list depends on the params (one Fig 7 row per λ)

COLUMNS = ("id", "source", "paper_statement", "paper_value", "statistic", "claimed_region", "estimate", "ci_low",
           "ci_high", "confidence", "ci_method", "measured_on", "verdict", "note")


def claim_rows(params: Mapping, root=layout.RESULTS) -> list[dict[str, Any]]:
    """Every claim's row (the columns of :data:`COLUMNS`)."""
    ctx = Context(params, root)
    rows = []
    for c in _claims(params):
        got = c.compute(ctx)
        iv = got.interval
        v = INCONCLUSIVE if iv is None else verdict(iv, c.region)
        note = got.note
        if iv is not None and (iv.low is None or iv.high is None):
            note = (note + "; " if note else "") + "no interval (too few units or resamples)"
        rows.append({
            "id": c.id, "source": c.source, "paper_statement": c.statement, "paper_value": c.paper_value,
            "statistic": c.statistic, "claimed_region": c.region.text,
            "estimate": None if iv is None else iv.estimate, "ci_low": None if iv is None else iv.low,
            "ci_high": None if iv is None else iv.high, "confidence": None if iv is None else iv.confidence,
            "ci_method": "" if iv is None else iv.method, "measured_on": got.measured_on, "verdict": v,
            "note": note,
        })
    return rows


def _cell(x) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.4g}"
    return str(x)


def write_claims(params: Mapping, root=layout.RESULTS) -> str:
    """Write ``claims/{dataset}.csv`` and ``claims/{dataset}.json``; return a one-line summary."""
    rows = claim_rows(params, root)
    csv_path = layout.fmt(layout.CLAIMS_CSV, root, dataset=params["data"]["name"])
    json_path = layout.fmt(layout.CLAIMS_JSON, root, dataset=params["data"]["name"])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(r[k]) for k in COLUMNS})
    atomic.write_text(csv_path, buf.getvalue())
    counts = {v: sum(r["verdict"] == v for r in rows) for v in CODES}
    atomic.write_json(json_path, {
        "dataset": params["data"]["name"], "rule": "docs/claims.md", "counts": counts, "claims": rows})
    return (f"{csv_path}: {len(rows)} claims — "
            + ", ".join(f"{k} {v}" for k, v in counts.items()))
