r"""Fig 4 (Sec. VI-D): the Hessian spectrum of the AdamW runs with λ > 0.

Statistics are computed per seed (over that seed's checkpoints of every λ > 0) and pooled with
a t interval over seeds (df = seeds − 1): checkpoints of one run are not independent.
Correlations are pooled on Fisher's z scale (:func:`villani.stats.correlation_interval`).
"""

from __future__ import annotations

import numpy as np

from villani.claims.context import Context, collapsed_note, join, none, per_seed_text
from villani.claims.registry import Measured, claim
from villani.claims.verdict import Region
from villani.stats import correlation_interval


def _positive(ctx: Context, column: str):
    m = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] > 0)].dropna(subset=[column]).reset_index(drop=True)
    return ctx.learned(m)


@claim("fig4_lammax_linear", "Fig 4, Sec. VI-D", "The spectral radius grows linearly: λ_max ∝ λ‖θ‖", "exponent 1",
       "slope of log μ_max (∇²F) on log(λ‖θ‖) within each seed (its checkpoints at every λ > 0), t over seeds",
       Region.around(1.0, 0.2))
def fig4_lammax_exponent(ctx: Context) -> Measured:
    m, excl = _positive(ctx, "lambda_max")
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if len(m) < 3:
        return none(join("fewer than 3 checkpoints with λ > 0", collapsed_note(excl)), where, excluded=excl)

    def exponent(g):
        x = np.log10(g["lam"].to_numpy(float) * np.sqrt(g["theta_sq_norm"].to_numpy(float)))
        return None if len(g) < 3 or np.ptp(x) == 0 else float(np.polyfit(x, np.log10(g["lambda_max"]), 1)[0])

    iv, vals = ctx.per_seed(m, exponent)
    return Measured(iv, where, join(per_seed_text(vals), "∇²F = ∇²L + λI, so μ_max(F) = μ_max(L) + λ",
                                    collapsed_note(excl)), excluded=excl)


@claim("fig4_ratio_rises_with_lam", "Fig 4, Sec. VI-D", "λ_max/λ_median increases with λ", "rises with λ",
       "Pearson r(log λ, log μ_max/μ_median) within each seed (λ > 0), pooled over seeds (Fisher z, t)",
       Region.direction(+1))
def fig4_ratio_rises(ctx: Context) -> Measured:
    m, excl = _positive(ctx, "spectral_ratio")
    m = m[m["spectral_ratio"] > 0]
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if m["lam"].nunique() < 2:
        return none(join("needs two λ > 0 with a defined ratio (μ_median > 0)", collapsed_note(excl)), where)
    iv = correlation_interval(np.log(m["lam"]), np.log(m["spectral_ratio"]), m["seed"].to_numpy(), kind="pearson",
                              confidence=ctx.confidence)
    med = ", ".join(f"λ = {x:g}: {m[m['lam'] == x]['spectral_ratio'].median():.3g}" for x in sorted(m["lam"].unique()))
    return Measured(iv, where, join(f"median ratio {med}; μ_median of ∇²F = ∇²L + λI is ≈ λ when the bulk of ∇²L "
                                    "is near 0, so the ratio ≈ μ_max/λ falls with λ", collapsed_note(excl)),
                    excluded=excl)


@claim("fig4_bulk_bounded", "Fig 4, Sec. VI-D / App. A", "The spectrum has a narrow bulk (bounded), a few outliers",
       "narrow bulk", "largest |μ_median − λ| / μ_max over a seed's checkpoints (λ > 0), t over seeds",
       Region.at_most(0.1))
def fig4_bulk(ctx: Context) -> Measured:
    m, excl = _positive(ctx, "lambda_median")
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if m.empty:
        return none(join("no spectrum at λ > 0", collapsed_note(excl)), where)
    iv, vals = ctx.per_seed(m, lambda g: float(np.max(np.abs(g["lambda_median"] - g["lam"]) / g["lambda_max"])))
    return Measured(iv, where, join(per_seed_text(vals), "μ_median − λ is the median eigenvalue of ∇²L (SLQ)",
                                    collapsed_note(excl)), excluded=excl)
