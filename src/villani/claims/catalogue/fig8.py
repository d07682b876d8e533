r"""Fig 8, Fig 9 and App. B measured here: the Hutchinson trace samples, with the paper's definitions.

Table III's rows per dataset and Fig 9's comparisons across λ are in :mod:`.table3`; what
the paper's own numbers decide about the trace is in :mod:`.trace_numbers`.

**The paper's CV.** Fig 8's CV is that of the 64 samples vᵀ∇²F v of *plain* Hutchinson at one
checkpoint (a per-sample CV, not a standard error), and Table III's "relative error" is the
same number: its CI column is t₆₃·RelErr·Mean/√64 (1.998 × 0.050 × 58.4/8 = 0.73). For
Rademacher v, vᵀ∇²F v = vᵀ∇²L v + λd, so the per-sample CV is exactly

.. math:: \mathrm{CV}_F = \frac{\sqrt{2\,(\|\nabla^2 L\|_F^2 - \sum_i (\nabla^2 L)_{ii}^2)}}
          {|\operatorname{tr}\nabla^2 L + \lambda d|},

from the unbiased ‖∇²L‖_F² and Σ(∇²L)_ii² every measurement records (``trace_L.frob_sq``,
``diag_sq``; :func:`villani.statistics.samples.predicted_cv` with one probe; without ``diag_sq`` the
Gaussian-probe bound 2‖∇²L‖_F², which the note says). This is the value the paper's sample
CV estimates, whatever estimator (plain or deflated) our measure stage ran; the test
``tests/claims/test_trace_claims.py`` checks it against plain samples of a dense matrix.

**What transfers.** CV_F depends on λd/tr ∇²F, and the trace magnitudes on d and the data;
neither scales with λ·η·T. A claim on them *needs scale* (:func:`priced`: what would decide
it and its GPU-hours) unless our measured ``λd/|tr ∇²F|`` lies within a factor 2 of the paper's
(Table III, PTB: 1.25·10⁵/6.42·10⁸ ≈ 1.9·10⁻⁴ at 10⁻³, 2.1·10⁻⁴ at 10⁻²; 0 at λ = 0). The
variance of the samples, Var(vᵀ∇²F v) = Var(vᵀ∇²L v), does not involve λd: its claims are
measured here. Per-seed values are pooled with a t interval over seeds (df = seeds − 1).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from villani.claims.catalogue.context import (Context, after_start, arithmetic, by_lam_text, join, left_out_note, modes_text,
                                    none, per_seed_text, run_codes, theta_range_text)
from villani.claims.catalogue.paper import PAPER_D, PAPER_M, TABLE3, table3_for
from villani.claims.catalogue.price import needs_scale
from villani.claims.catalogue.registry import ARITHMETIC, Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.io.results import is_doubly_stochastic, trace_samples
from villani.plan.paper_lambda import PAPER_LAMBDAS
from villani.plan.runs import Run
from villani.statistics.intervals import proportion_interval
from villani.statistics.samples import hutchinson_variance, predicted_cv, shapiro_p, within_slope

RATIO_FACTOR = 2.0


def paper_lam_d_ratio(name: str, dataset: str = "ptb") -> float:
    """λd / tr ∇²F in the paper's Table III (``dataset``'s rows)."""
    return PAPER_LAMBDAS[name] * PAPER_D / (TABLE3[dataset][name][0] * 1e8)


def cv_F(m: pd.DataFrame) -> np.ndarray:
    """The per-sample CV of plain Hutchinson samples vᵀ∇²F v at each row (module docstring)."""
    diag = m["trace_L_diag_sq"] if "trace_L_diag_sq" in m else pd.Series(np.nan, index=m.index)
    out = []
    for frob, dg, tr in zip(m["trace_L_frob_sq"], diag, m["laplacian_F"]):
        if frob is None or not np.isfinite(frob):  # a doubly stochastic trace: no ‖∇²L‖_F²
            out.append(np.nan)
            continue
        d = None if dg is None or not np.isfinite(dg) else max(float(dg), 0.0)
        v = predicted_cv(max(float(frob), 0.0), float(tr), 1, d)
        out.append(np.nan if v is None else v)
    return np.asarray(out, dtype=float)


def transfer(ctx: Context, m: pd.DataFrame, name: str, dataset: str | None = None) -> str | None:
    """``None`` when our ``λd/|tr ∇²F|`` is within :data:`RATIO_FACTOR` of the paper's (Table III of
    ``dataset``, default our corpus's, :func:`villani.claims.catalogue.paper.table3_for`), else the reason."""
    if m.empty:
        return None
    ours = float(np.median(m["lam_d"] / m["laplacian_F"].abs()))
    paper = paper_lam_d_ratio(name, dataset or table3_for(ctx.dataset)[0])
    if paper == 0.0 and ours == 0.0:
        return None
    if paper > 0 and ours > 0 and abs(math.log(ours / paper)) <= math.log(RATIO_FACTOR):
        return None
    return (f"λd/|tr ∇²F| is {ours:.3g} here and {paper:.3g} in the paper (d = {int(m['d'].iloc[0]):,} vs "
            "1.25·10⁸): a CV or trace magnitude does not transfer")


def priced(ctx: Context, got: Measured, why: str | None, *, lams: int = 1, dataset: str = "ptb",
           what: str = "") -> Measured:
    """``got`` as it is, or — when ``why`` says this scale cannot decide it — a *needs scale* row
    keeping our statistic, with what would decide it and its price (:func:`villani.claims.catalogue.price.needs_scale`)."""
    return got if why is None else needs_scale(ctx, why, dataset, lams=lams, what=what, measured=got)


def phase_rows(m: pd.DataFrame, phase: str) -> pd.DataFrame:
    """The rows of the ``phase`` checkpoints: early (first), middle, late (last), later_half or all."""
    steps = sorted(m["step"].unique())
    if phase == "all" or not steps:
        return m
    pick = {"early": steps[:1], "middle": [steps[len(steps) // 2]], "late": steps[-1:],
            "later_half": steps[len(steps) // 2:]}[phase]
    return m[m["step"].isin(pick)]


def carried_text(m: pd.DataFrame, cv: np.ndarray) -> str:
    """Where a seed's mean CV over checkpoints comes from when one checkpoint carries more than
    half of it — a checkpoint whose ``|tr ∇²F|`` is near 0 (at λ = 0, the initialisation) makes
    its ``CV = SD/|tr ∇²F|`` explode and the seeds' means differ by that checkpoint alone."""
    out = []
    for seed, g in m.assign(cv=cv).dropna(subset=["cv"]).groupby("seed"):
        top = g.loc[g["cv"].idxmax()]
        if len(g) > 1 and top["cv"] > 0.5 * g["cv"].sum():
            rest = (g["cv"].sum() - top["cv"]) / (len(g) - 1)
            out.append(f"seed {int(seed)}: step {int(top['step'])} carries {100 * top['cv'] / g['cv'].sum():.0f}% "
                       f"of the sum (CV {top['cv']:.3g} at tr ∇²F = {top['laplacian_F']:.3g}; the other checkpoints' "
                       f"mean {rest:.3g})")
    return "one checkpoint carries a seed's mean — " + "; ".join(out) if out else ""


def per_sample_cv(ctx: Context, name: str, phase: str, *, scale: float = 1.0, dataset: str | None = None) -> Measured:
    """The per-sample CV (× ``scale``) at our λ matched to the paper's ``name``: per seed its mean
    over the ``phase`` checkpoints, the t interval of the logs over seeds, back-transformed (a
    CV is positive and its spread multiplicative: docs/claims.md, :func:`villani.statistics.intervals.seed_interval`)."""
    mt = ctx.match(name)
    m, excl = ctx.rows("adamw", [mt.ours])
    m = phase_rows(m, phase)
    where = ctx.where("adamw", [mt.ours], m, extra=f", {phase} checkpoints")
    if mt.ours is None:
        return none(mt.text(), where, match_=mt)
    if m.empty:
        return none(join("no learned run", left_out_note(excl)), where, match_=mt, excluded=excl)
    iv, vals = ctx.per_seed(m, lambda g: float(np.nanmean(cv_F(g))) * scale, scale="log")
    bound = "" if m["trace_L_diag_sq"].notna().all() else "Σ(∇²L)_ii² not recorded: the 2‖∇²L‖_F² bound"
    got = Measured(iv, where, join(per_seed_text(vals), modes_text(vals), carried_text(m, cv_F(m)), bound,
                                   left_out_note(excl)), match=mt, excluded=excl)
    return priced(ctx, got, transfer(ctx, m, name, dataset), dataset=dataset or table3_for(ctx.dataset)[0],
                  what=f"the per-sample CV at λ = {PAPER_LAMBDAS[name]:g}")


def cv_claim(cid, source, statement, value, name, phase, scale=1.0, region=None, tol=0.25, dataset=None):
    """Declare a claim on the per-sample CV at the paper's λ ``name`` over the ``phase`` checkpoints."""
    claim(cid, source, statement, f"{value:g}",
          f"per-sample CV of plain Hutchinson samples vᵀ∇²F v{' / √64' if scale != 1 else ''}, mean over the {phase} "
          f"checkpoints, our λ matched to {PAPER_LAMBDAS[name]:g}; t interval of the logs over seeds, back-transformed",
          region or Region.around(value, tol, relative=True))(
        lambda ctx: per_sample_cv(ctx, name, phase, scale=scale, dataset=dataset))


cv_claim("fig8_cv_early", "Fig 8", "CV of the trace samples 12.3% early in training", 0.123, "middle", "early")
cv_claim("fig8_cv_middle", "Fig 8", "CV 4.9% mid-training", 0.049, "middle", "middle")
cv_claim("fig8_cv_late", "Fig 8", "CV 5.0% at the end", 0.050, "middle", "late")
cv_claim("fig9_cv_plateau", "Fig 9, Sec. VI-H", "The CV plateaus near 4.9%", 0.049, "middle", "later_half")
cv_claim("appB_error_below_3pct", "App. A-B/B", "M = 64 probes give < 3% error", 0.03, "middle", "all",
         scale=1 / math.sqrt(PAPER_M), region=Region.at_most(0.03, strict=True))


def plain_variance(m: pd.DataFrame) -> np.ndarray:
    """Var(vᵀ∇²L v) of one plain Rademacher sample at each row: 2(‖∇²L‖_F² − Σ(∇²L)_ii²) (SPEC §5),
    = ``(CV_F·|tr ∇²F|)²`` — the same for vᵀ∇²F v, since λI shifts every sample by λd."""
    return (cv_F(m) * m["laplacian_F"].abs().to_numpy(float)) ** 2


@claim("fig8_var_scales_lam2_theta2", "Fig 8, eq. 57", "Var[ΔF̂] scales as λ²‖θ‖²: the ‖θ‖² part", "exponent 1 in ‖θ‖²",
       "per seed: within-run slope of log Var(vᵀ∇²L v) on log ‖θ‖² (each run's means removed; checkpoints after "
       "step 0, every λ > 0), t over seeds — the exponent at fixed λ (the λ² part: fig8_var_lam_part)",
       Region.around(1.0, 0.2))
def fig8_var(ctx: Context) -> Measured:
    r"""The exponent of ‖θ‖² in Var(vᵀ∇²L v) at fixed λ: within each run (variant, λ, seed) the
    checkpoints after step 0 (step 0 is every λ's common initialisation), each run's means of
    log Var and log ‖θ‖² removed (:func:`villani.statistics.samples.within_slope`), so the λ between runs
    cannot carry the slope. The variance's λ² part is arithmetic (:func:`fig8_var_lam`)."""
    lams = [x for x in ctx.params.train.lambdas if x > 0]
    m, excl = ctx.rows("adamw", lams)
    m = after_start(m).assign(var=lambda d: plain_variance(d))
    m = m[np.isfinite(m["var"]) & (m["var"] > 0)]
    where = ctx.where("adamw", lams, m, extra=", after step 0")
    slope = (lambda g: within_slope(np.log(g["theta_sq_norm"]), np.log(g["var"]), run_codes(g)))
    if m.empty or slope(m) is None:
        return none(join("no run with two checkpoints after step 0 at λ > 0", left_out_note(excl)), where,
                    excluded=excl)
    iv, vals = ctx.per_seed(m, slope)
    return Measured(iv, where, join(per_seed_text(vals), by_lam_text(m, slope), theta_range_text(m),
                                    "Var(vᵀ∇²F v) = Var(vᵀ∇²L v): λI adds no variance", left_out_note(excl)),
                    excluded=excl)


@claim("fig8_var_lam_part", "Fig 8, eq. 57", "Var[ΔF̂] scales as λ²‖θ‖²: the λ² part", "exponent 2 in λ",
       "log-log slope of Var(vᵀ(H + λI)v) in λ from 10⁻³ to 10⁻² at a fixed symmetric H, Rademacher v (the exact "
       "variance 2(‖A‖_F² − Σ A_ii²) of villani.statistics.samples.hutchinson_variance; arithmetic)", Region.around(2.0, 0.4),
       basis=ARITHMETIC)
def fig8_var_lam(ctx: Context) -> Measured:
    r"""For Rademacher v, ‖v‖² = d, so vᵀ(H + λI)v = vᵀHv + λd: every sample moves by the same
    λd and the variance is λ's nowhere — 2(‖H + λI‖_F² − Σ(H_ii + λ)²) = 2(‖H‖_F² − ΣH_ii²), and
    the paper's own eq. 57, (2/M)Σ_{i<j}(μᵢ − μⱼ)², is shift-invariant too. Computed here on a
    fixed 8×8 symmetric H (seeded) at the paper's λ = 10⁻³ and 10⁻²."""
    h = np.random.default_rng(0).standard_normal((8, 8))
    h = (h + h.T) / 2
    lo, hi = PAPER_LAMBDAS["middle"], PAPER_LAMBDAS["strong"]
    var = [hutchinson_variance(float(np.sum(a * a)), float(np.sum(np.diag(a) ** 2)))
           for a in (h + lo * np.eye(8), h + hi * np.eye(8))]
    exponent = round(math.log(var[1] / var[0]) / math.log(hi / lo), 12)  # 0 up to the floats' rounding (~1e-16)
    return arithmetic(exponent, "Var(vᵀ(H + λI)v) = 2(‖H‖_F² − ΣH_ii²) "
                      "for Rademacher v, at λ = 10⁻³ and 10⁻²",
                      "wrong at any scale: λI shifts every Rademacher sample by λd, so the variance — ours and the "
                      "paper's eq. 57 alike — has no λ in it; λ can act on it only through ∇²L (training), whose "
                      "‖θ‖² dependence fig8_var_scales_lam2_theta2 measures at fixed λ")


@claim("fig8_variance_decreases", "Fig 8, Sec. VI-H", "Variance decreases as training progresses",
       "Var(late) < Var(early)", "per seed: log(Var(vᵀ∇²L v) at the last checkpoint / at the first), mean over its runs "
       "at the λ matched to 1e-3, t over seeds", Region.direction(-1))
def fig8_variance_decreases(ctx: Context) -> Measured:
    mt = ctx.match("middle")
    m, excl = ctx.rows("adamw", [mt.ours])
    where = ctx.where("adamw", [mt.ours], m, extra=", first and last checkpoint")
    if mt.ours is None:
        return none(mt.text(), where, match_=mt)
    m = m.assign(var=plain_variance(m))

    def log_ratio(g):
        g = g.sort_values("step").dropna(subset=["var"])
        return float(np.log(g["var"].iloc[-1] / g["var"].iloc[0])) if len(g) >= 2 and g["var"].iloc[0] > 0 else None

    got = ctx.seed_measured(m, log_ratio, where, match=mt, excluded=excl)
    return Measured(got.interval, got.measured_on, join(got.note, "Var(vᵀ∇²F v) = 2(‖∇²L‖_F² − Σ(∇²L)_ii²): the "
                    "penalty λI adds no variance, so a falling variance is a change of ∇²L, not of λ's dominance"),
                    match=mt, excluded=excl)


PLAIN = ("the 64 plain Hutchinson samples at λ = 10⁻³ (measure.trace_estimator: hutchinson; at this scale "
         "configs/laptop.yaml records them on a CPU)")


@claim("fig8_normality", "Fig 8", "All distributions pass normality tests (Shapiro–Wilk p > 0.3)",
       "normal samples", "fraction of early/middle/late checkpoints × seeds whose plain Hutchinson samples Shapiro–"
       "Wilk rejects at α = 0.05 (normal samples: 0.05), Clopper–Pearson", Region.at_most(0.05))
def fig8_normality(ctx: Context) -> Measured:
    mt = ctx.match("middle")
    m, excl = ctx.rows("adamw", [mt.ours])
    steps = sorted(m["step"].unique())
    picked = m[m["step"].isin({steps[0], steps[len(steps) // 2], steps[-1]})] if steps else m
    where = ctx.where("adamw", [mt.ours], picked, extra=", early/middle/late checkpoints")
    if mt.ours is None:
        return none(mt.text(), where, match_=mt)
    if picked.empty:
        return none(join("no learned run", left_out_note(excl)), where, match_=mt, excluded=excl)
    if picked["trace_L_estimator"].map(is_doubly_stochastic).any():
        return needs_scale(ctx, "a doubly stochastic trace (measure.ds_blocks) recorded group means at some of "
                           "these checkpoints, not the paper's plain samples", what=PLAIN)
    if (picked["trace_L_deflation_rank"] > 0).any():
        return needs_scale(ctx, "the measure stage recorded deflated samples (measure.trace_estimator: deflated), "
                           "not the paper's plain ones", what=PLAIN)
    ps = [shapiro_p(trace_samples(ctx.params, Run(ctx.dataset, "adamw", r.lam, int(r.seed)), int(r.step), ctx.root))
          for r in picked.itertuples()]
    ps = [p for p in ps if p is not None]
    k = sum(p < 0.05 for p in ps)
    return Measured(proportion_interval(k, len(ps), ctx.confidence), where,
                    join(f"{k} of {len(ps)} rejected at 0.05; p = {', '.join(f'{p:.2g}' for p in ps)}; 'every p > "
                         f"0.3' fails for normal samples with probability 1 − 0.7^n", left_out_note(excl)),
                    match=mt, excluded=excl)
