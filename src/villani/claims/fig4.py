r"""Fig 4 (Sec. VI-D): the Hessian spectrum of the AdamW runs with λ > 0.

Statistics are computed per seed (over that seed's checkpoints of every λ > 0) and pooled with
a t interval over seeds (df = seeds − 1): checkpoints of one run are not independent. What
the definitions decide (the penalty's Hessian is λI) is a row of class *arithmetic*.
"""

from __future__ import annotations

import numpy as np

from villani.claims.context import Context, after_start, arithmetic, left_out_note, join, none, per_seed_text
from villani.claims.paper import PAPER_LAMBDAS
from villani.claims.registry import ARITHMETIC, Measured, claim
from villani.claims.verdict import Region
from villani.stats import Interval


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
        return none(join("fewer than 3 checkpoints with λ > 0", left_out_note(excl)), where, excluded=excl)

    def exponent(g):
        x = np.log10(g["lam"].to_numpy(float) * np.sqrt(g["theta_sq_norm"].to_numpy(float)))
        return None if len(g) < 3 or np.ptp(x) == 0 else float(np.polyfit(x, np.log10(g["lambda_max"]), 1)[0])

    iv, vals = ctx.per_seed(m, exponent)
    return Measured(iv, where, join(per_seed_text(vals), "∇²F = ∇²L + λI, so μ_max(F) = μ_max(L) + λ",
                                    left_out_note(excl)), excluded=excl)


@claim("fig4_ratio_rises_with_lam", "Fig 4, Sec. VI-D", "λ_max/λ_median increases with λ", "rises with λ",
       "per seed: slope of log(μ_max/μ_median) on log λ over its checkpoints after step 0 at every λ > 0, t over seeds",
       Region.direction(+1))
def fig4_ratio_rises(ctx: Context) -> Measured:
    r"""∇²F = ∇²L + λI, so μ_median(F) = μ_median(L) + λ ≈ λ when the bulk of ∇²L sits near 0:
    the ratio is then ≈ μ_max(L)/λ + 1 and its slope on log λ is ≈ −1 *by construction*; the
    claim's content is whether μ_max grows with λ faster than λ itself (slope > 0). Step 0 is
    left out: there every λ has the same θ and the ratio differs by λ alone."""
    m, excl = _positive(ctx, "spectral_ratio")
    m = after_start(m[m["spectral_ratio"] > 0])
    where = ctx.where("adamw", sorted(m["lam"].unique()), m, extra=", after step 0")
    if m["lam"].nunique() < 2:
        return none(join("needs two λ > 0 with a defined ratio (μ_median > 0)", left_out_note(excl)), where)

    def slope(g):
        x = np.log(g["lam"].to_numpy(float))
        return float(np.polyfit(x, np.log(g["spectral_ratio"].to_numpy(float)), 1)[0]) if np.ptp(x) > 0 else None

    iv, vals = ctx.per_seed(m, slope)
    med = ", ".join(f"λ = {x:g}: {m[m['lam'] == x]['spectral_ratio'].median():.3g}" for x in sorted(m["lam"].unique()))
    return Measured(iv, where, join(per_seed_text(vals), f"median ratio {med}; μ_median ≈ λ alone gives slope ≈ −1 "
                                    "(the ratio ≈ μ_max/λ)", left_out_note(excl)), excluded=excl)


@claim("fig4_bulk_bounded", "Fig 4, Sec. VI-D / App. A", "The spectrum has a narrow bulk (bounded), a few outliers",
       "narrow bulk", "per seed: largest |μ_median − λ| / μ_max over its checkpoints (λ > 0); t interval of the log over "
       "seeds, back-transformed (a ratio ≥ 0)", Region.at_most(0.1))
def fig4_bulk(ctx: Context) -> Measured:
    r"""Close to a tautology: the median eigenvalue of ∇²L is ≈ 0 in any trained network (most
    directions are flat), so the statistic is small whatever λ does. The note gives its value at
    step 0 and at λ = 0 — where no decay has acted — for comparison. The interval is a t
    interval of the per-seed log ratios, back-transformed: it never reaches below 0."""
    m, excl = _positive(ctx, "lambda_median")
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if m.empty:
        return none(join("no spectrum at λ > 0", left_out_note(excl)), where)

    def stat(g):
        v = float(np.max(np.abs(g["lambda_median"] - g["lam"]) / g["lambda_max"]))
        return float(np.log(v)) if v > 0 else None

    iv, vals = ctx.per_seed(m, stat)
    zero = ctx.m[(ctx.m["variant"] == "adamw") & (ctx.m["lam"] == 0)].dropna(subset=["lambda_median"])
    first = m[m["step"] == m["step"].min()]
    ref = ", ".join(f"{k}: {float(np.max(np.abs(g['lambda_median'] - g['lam']) / g['lambda_max'])):.3g}"
                    for k, g in (("at step 0", first), ("at λ = 0", zero)) if len(g))
    back = Interval(*(None if v is None else float(np.exp(v)) for v in (iv.estimate, iv.low, iv.high)),
                    iv.confidence, iv.n, iv.units, iv.dof, iv.method + ", of log values, back-transformed by exp")
    return Measured(back, where, join(per_seed_text({k: float(np.exp(v)) for k, v in vals.items()}),
                                      f"the same statistic {ref} (before any decay acts): the median eigenvalue of "
                                      "∇²L is ≈ 0 in any network, so this row is close to a tautology",
                                      left_out_note(excl)), excluded=excl)


@claim("fig4_penalty_curvature", "Fig 4, Sec. VI-D, App. A-B", "Weight decay inflates the spectral radius "
       "linearly, λ_max ∼ λ‖θ‖", "exponent 1 in ‖θ‖", "exponent of ‖θ‖ in the top eigenvalue of the penalty's Hessian "
       "∇²(λ‖θ‖²/2) (arithmetic)", Region.around(1.0, 0.2), basis=ARITHMETIC)
def fig4_penalty(ctx: Context) -> Measured:
    lam, radii = PAPER_LAMBDAS["middle"], np.array([1e2, 1e4])
    top = np.full(radii.shape, lam)  # ∇²(λ‖θ‖²/2) = λI at every θ: its top eigenvalue is λ
    return arithmetic(float(np.log(top[1] / top[0]) / np.log(radii[1] / radii[0])), "∇²(λ‖θ‖²/2) = λI at every θ",
                      "wrong at any scale: the penalty adds λ to every eigenvalue, whatever ‖θ‖; a λ_max growing "
                      "with ‖θ‖ must come from ∇²L, which the theory bounds (eq. 17), not from the decay")
