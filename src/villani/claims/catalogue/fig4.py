r"""Fig 4 (Sec. VI-D): the Hessian spectrum of the AdamW runs with λ > 0.

Statistics are computed per seed (over that seed's checkpoints of every λ > 0, after step 0,
where every λ shares θ₀) and pooled with a t interval over seeds (df = seeds − 1): checkpoints
of one run are not independent. The ‖θ‖ exponent is estimated within runs, at fixed λ. What
the definitions decide (the penalty's Hessian is λI: it adds λ to every eigenvalue, whatever
‖θ‖, and lowers μ_max/μ_median) is a row of class *arithmetic*. Every λ here is the run's own,
the λ·η·T match of the paper's (:mod:`villani.plan.paper_lambda`).
"""

from __future__ import annotations

import math

import numpy as np

from villani.claims.catalogue.context import (Context, after_start, arithmetic, by_lam_text, fmt, join, left_out_note, none,
                                    per_seed_text, run_codes, theta_range_text)
from villani.claims.catalogue.paper import PAPER_LAMBDAS
from villani.claims.catalogue.registry import ARITHMETIC, Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.statistics.samples import within_slope


def _positive(ctx: Context, column: str):
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] > 0)].dropna(subset=[column]).reset_index(drop=True)
    return ctx.learned(m)


@claim("fig4_lammax_linear", "Fig 4, Sec. VI-D", "The spectral radius grows linearly: λ_max ∝ λ‖θ‖", "exponent 1 in ‖θ‖",
       "per seed: within-run slope of log μ_max(∇²F) on log ‖θ‖ (each run's means removed; checkpoints after step 0, "
       "every λ > 0), t over seeds — the ‖θ‖ exponent at fixed λ", Region.around(1.0, 0.2))
def fig4_lammax_exponent(ctx: Context) -> Measured:
    r"""The claim is about how μ_max depends on ‖θ‖: within each run (λ fixed) the checkpoints
    after step 0 (there every λ shares θ₀), each run's means of log μ_max and log ‖θ‖ removed
    (:func:`villani.statistics.samples.within_slope`). A slope over the pooled checkpoints of every λ would
    be carried by λ between runs (μ_max(F) = μ_max(L) + λ), not by ‖θ‖. μ_max is of ∇²F at
    the run's own λ — the λ·η·T match of the paper's (:mod:`villani.plan.paper_lambda`)."""
    m, excl = _positive(ctx, "lambda_max")
    m = after_start(m[m["lambda_max"] > 0])
    where = ctx.where("adamw", sorted(m["lam"].unique()), m, extra=", after step 0")
    slope = (lambda g: within_slope(0.5 * np.log(g["theta_sq_norm"]), np.log(g["lambda_max"]), run_codes(g)))
    if m.empty or slope(m) is None:
        return none(join("no run with two checkpoints after step 0 at λ > 0", left_out_note(excl)), where,
                    excluded=excl)
    iv, vals = ctx.per_seed(m, slope)
    return Measured(iv, where, join(per_seed_text(vals), by_lam_text(m, slope), theta_range_text(m),
                                    "μ_max of ∇²F at the run's own λ (the λ·η·T match of the paper's); ∇²F = ∇²L + "
                                    "λI, so μ_max(F) = μ_max(L) + λ: the penalty adds λ whatever ‖θ‖ "
                                    "(fig4_penalty_curvature)", left_out_note(excl)), excluded=excl)


@claim("fig4_ratio_rises_with_lam", "Fig 4, Sec. VI-D", "λ_max/λ_median increases with λ", "rises with λ",
       "per seed: slope of log(μ_max/μ_median) on log λ over its checkpoints after step 0 at every λ > 0, t over seeds",
       Region.direction(+1))
def fig4_ratio_rises(ctx: Context) -> Measured:
    r"""∇²F = ∇²L + λI, so μ_median(F) = μ_median(L) + λ ≈ λ when the bulk of ∇²L sits near 0:
    the ratio is then ≈ μ_max(L)/λ + 1 and its slope on log λ is ≈ −1 *by construction*
    (:func:`fig4_ratio_penalty`, arithmetic). What is left to measure is how training at λ moves
    ∇²L's top: the ratio rises only if μ_max(L) = μ_max(F) − λ grows faster than λ — its slope
    on log λ (per seed, t over seeds) is in the note beside 1. Step 0 is left out: there every λ
    has the same θ and the ratio differs by λ alone."""
    m, excl = _positive(ctx, "spectral_ratio")
    m = after_start(m[m["spectral_ratio"] > 0])
    where = ctx.where("adamw", sorted(m["lam"].unique()), m, extra=", after step 0")
    if m["lam"].nunique() < 2:
        return none(join("needs two λ > 0 with a defined ratio (μ_median > 0)", left_out_note(excl)), where)

    def slope(y):
        def fit(g):
            x, v = np.log(g["lam"].to_numpy(float)), y(g)
            ok = np.isfinite(v)
            return float(np.polyfit(x[ok], v[ok], 1)[0]) if ok.sum() > 1 and np.ptp(x[ok]) > 0 else None
        return fit

    iv, vals = ctx.per_seed(m, slope(lambda g: np.log(g["spectral_ratio"].to_numpy(float))))
    top_l, _ = ctx.per_seed(m, slope(lambda g: np.log(np.clip((g["lambda_max"] - g["lam"]).to_numpy(float), 0, None))))
    med = ", ".join(f"λ = {x:g}: {m[m['lam'] == x]['spectral_ratio'].median():.3g}" for x in sorted(m["lam"].unique()))
    return Measured(iv, where, join(per_seed_text(vals), f"median ratio {med}", "μ_median(F) ≈ λ alone gives slope ≈ −1 "
                                    "(fig4_ratio_penalty_part); what training adds — the slope of log μ_max(∇²L) on "
                                    f"log λ — is {fmt(top_l.estimate)} [{fmt(top_l.low)}, {fmt(top_l.high)}] (t over "
                                    "seeds): the ratio rises only where it exceeds 1", left_out_note(excl)),
                    excluded=excl)


@claim("fig4_ratio_penalty_part", "Fig 4, Sec. VI-D", "Weight decay inflates the spectrum anisotropically: it "
       "\"selectively sharpens the top eigenmodes\", raising λ_max/λ_median", "rises with λ", "log-log slope of μ_max(∇²F)/μ_median(∇²F) in λ at a fixed ∇²L with "
       "μ_median(∇²L) = 0 and App. A's μ_max(∇²L) ∼ √(λ‖θ‖) = √10 (λ = 10⁻³, ‖θ‖ = 10⁴): what the penalty λI does "
       "to the ratio (arithmetic)", Region.direction(+1), basis=ARITHMETIC)
def fig4_ratio_penalty(ctx: Context) -> Measured:
    r"""At a fixed ∇²L with top eigenvalue a and median b, ∇²F = ∇²L + λI has the ratio
    r(λ) = (a + λ)/(b + λ), and ∂r/∂λ = (b − a)/(b + λ)² < 0 whenever a > b: adding λI lowers
    the ratio of every Hessian whose spectrum is not flat. With b = 0 (the paper's bulk
    "controlled by data", near 0) the log-log slope is λ/(a + λ) − 1 = −a/(a + λ) → −1."""
    lam, a, b = PAPER_LAMBDAS["middle"], math.sqrt(PAPER_LAMBDAS["middle"] * 1e4), 0.0
    slope = lam / (a + lam) - lam / (b + lam)
    return arithmetic(slope, "d log((a + λ)/(b + λ))/d log λ = λ/(a + λ) − λ/(b + λ), a = √(λ‖θ‖), b = 0",
                      "wrong at any scale as the penalty's doing: λI adds λ to μ_max and μ_median alike, which "
                      "lowers their ratio for every Hessian whose top eigenvalue exceeds its median; a ratio that "
                      "rises with λ must come from training moving ∇²L's top faster than λ (fig4_ratio_rises_with_lam "
                      "measures that)")


@claim("fig4_bulk_bounded", "Fig 4, Sec. VI-D / App. A", "The spectrum has a narrow bulk (bounded), a few outliers",
       "narrow bulk", "per seed: largest |μ_median − λ| / μ_max over its checkpoints (λ > 0); t interval of the log over "
       "seeds, back-transformed (a ratio ≥ 0)", Region.at_most(0.1))
def fig4_bulk(ctx: Context) -> Measured:
    r"""Close to a tautology: the median eigenvalue of ∇²L is ≈ 0 in any trained network (most
    directions are flat), so the statistic is small whatever λ does. The note gives its value at
    step 0 and at λ = 0 — where no decay has acted — for comparison. The interval is the t
    interval of the per-seed log ratios, back-transformed (``per_seed(..., scale="log")``): it
    never reaches below 0."""
    m, excl = _positive(ctx, "lambda_median")
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if m.empty:
        return none(join("no spectrum at λ > 0", left_out_note(excl)), where)

    def stat(g):
        return float(np.max(np.abs(g["lambda_median"] - g["lam"]) / g["lambda_max"]))

    iv, vals = ctx.per_seed(m, stat, scale="log")
    zero = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == 0)].dropna(subset=["lambda_median"])
    first = m[m["step"] == m["step"].min()]
    ref = ", ".join(f"{k}: {float(np.max(np.abs(g['lambda_median'] - g['lam']) / g['lambda_max'])):.3g}"
                    for k, g in (("at step 0", first), ("at λ = 0", zero)) if len(g))
    return Measured(iv, where, join(per_seed_text(vals), f"the same statistic {ref} (before any decay acts): the "
                                    "median eigenvalue of ∇²L is ≈ 0 in any network, so this row is close to a "
                                    "tautology", left_out_note(excl)), excluded=excl)


@claim("fig4_penalty_curvature", "Fig 4, Sec. VI-D, App. A-B", "Weight decay inflates the spectral radius "
       "linearly, λ_max ∼ λ‖θ‖", "exponent 1 in ‖θ‖", "exponent of ‖θ‖ in the top eigenvalue of the penalty's Hessian "
       "∇²(λ‖θ‖²/2) (arithmetic)", Region.around(1.0, 0.2), basis=ARITHMETIC)
def fig4_penalty(ctx: Context) -> Measured:
    lam, radii = PAPER_LAMBDAS["middle"], np.array([1e2, 1e4])
    top = np.full(radii.shape, lam)  # ∇²(λ‖θ‖²/2) = λI at every θ: its top eigenvalue is λ
    return arithmetic(float(np.log(top[1] / top[0]) / np.log(radii[1] / radii[0])), "∇²(λ‖θ‖²/2) = λI at every θ",
                      "wrong at any scale: the penalty adds λ to every eigenvalue, whatever ‖θ‖; a λ_max growing "
                      "with ‖θ‖ must come from ∇²L, which the theory bounds (eq. 17), not from the decay")
