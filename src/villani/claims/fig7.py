r"""Fig 7 (Sec. VI-G) and Sec. IV: Ψ_s against validation perplexity, and Ψ_s against λ.

A correlation is computed within each run (its checkpoints) — or within each seed where
the claim pools λ — and pooled on Fisher's z scale with a t interval over runs/seeds
(:func:`villani.stats.correlation_interval`). Signed r is tested wherever the paper claims
a direction; where it reports R² alone, its R² is tested and r is in the note.
"""

from __future__ import annotations

import numpy as np

from villani.claims.context import Context, collapsed_note, join, none, run_codes
from villani.claims.registry import Claim, Measured, claim, claim_family
from villani.claims.verdict import Region
from villani.plan.paper_lambda import paper_equivalent
from villani.plan.runs import variant_lambdas, variant_params, variants
from villani.stats import correlation_interval, run_correlations


def _id_lam(lam: float) -> str:
    """λ in a claim id, without '.' (ids are metrics.json keys): 0.1 → 0p1, 1.0 → 1, 1e-4 → 1e-04."""
    return f"{float(lam):g}".replace(".", "p")


def _corr(ctx: Context, variant: str, lam: float, kind: str) -> Measured:
    m, excl = ctx.rows(variant, [lam])
    m = m.dropna(subset=[ctx.psi, "val_ppl"]).reset_index(drop=True)
    t = variant_params(ctx.params, variant)["train"]
    eq = paper_equivalent(lam, lr=float(t["lr"]), steps=int(t["steps"]))
    where = ctx.where(variant, [lam], m, extra=f" (paper-equivalent λ by λ·η·T: {eq:.2g})")
    if len(m) < 3:
        return none(join(f"too few checkpoints of learned runs ({len(m)})", collapsed_note(excl)), where,
                    excluded=excl)
    iv = correlation_interval(m[ctx.psi], m["val_ppl"], run_codes(m), kind=kind, confidence=ctx.confidence)
    return Measured(iv, where, join("Ψ_s = −(tr ∇²L + λd) + ‖∇F‖²/s: within one λ, λd is a constant",
                                    collapsed_note(excl)), excluded=excl)


@claim_family("fig7_direction_<variant>_lam<λ>", "Fig 7, Sec. VI-G", "Higher Ψ_s goes with lower validation "
              "perplexity", "negative association", "Pearson r(Ψ_s, validation perplexity) within each run, pooled "
              "(Fisher z, t over runs), one row per update rule and λ", Region.direction(-1))
def fig7_directions(params) -> list[Claim]:
    out = []
    for v in ("adamw", "adam_l2", "langevin"):
        if v not in variants(params):
            continue
        for lam in variant_lambdas(params, v):
            out.append(Claim(f"fig7_direction_{v}_lam{_id_lam(lam)}", "Fig 7, Sec. VI-G",
                             "Higher Ψ_s goes with lower validation perplexity", "negative association",
                             f"Pearson r(Ψ_s, validation perplexity) within each run, pooled, {v} λ = {lam:g}",
                             Region.direction(-1), lambda ctx, v=v, lam=float(lam): _corr(ctx, v, lam, "pearson"),
                             __name__))
    return out


def _r2(ctx: Context, name: str) -> Measured:
    mt = ctx.match(name)
    if mt.ours is None:
        return none(mt.text(), ctx.where("adamw", []), match_=mt)
    got = _corr(ctx, "adamw", mt.ours, "r2")
    return Measured(got.interval, got.measured_on, join(got.note, "R² alone hides the sign"), match=mt,
                    excluded=got.excluded)


@claim("fig7_r2_strong", "Fig 7, Sec. VI-G", "R² = 0.94 between Ψ_s and perplexity at λ = 10⁻²", "0.94",
       "Pearson r² of Ψ_s and validation perplexity within each run, pooled, our λ matched to 1e-2",
       Region.around(0.94, 0.05))
def fig7_r2_strong(ctx: Context) -> Measured:
    return _r2(ctx, "strong")


@claim("fig7_r2_zero", "Fig 7, Sec. VI-G", "R² = 0.23 between Ψ_s and perplexity at λ = 0", "0.23",
       "Pearson r² of Ψ_s and validation perplexity within each run, pooled, λ = 0", Region.around(0.23, 0.1))
def fig7_r2_zero(ctx: Context) -> Measured:
    return _r2(ctx, "zero")


@claim("fig7_r2_rises_with_lam", "Fig 7, Sec. VI-G", "Correlation strength increases with λ",
       "R²(λ = 10⁻²) > R²(λ = 0)", "per seed: r²(our λ matched to 1e-2) − r²(λ = 0), t over seeds",
       Region.direction(+1))
def fig7_r2_increases(ctx: Context) -> Measured:
    mt = ctx.match("strong")
    m, excl = ctx.rows("adamw", [0.0, mt.ours])
    m = m.dropna(subset=[ctx.psi, "val_ppl"])
    where = ctx.where("adamw", [0.0, mt.ours], m)
    if mt.ours is None or m["lam"].nunique() < 2:
        return none(join(mt.text() if mt.ours is None else "needs learned runs at λ = 0 and the strong λ",
                         collapsed_note(excl)), where, match_=mt, excluded=excl)

    def diff(g):
        r = {lam: run_correlations(h[ctx.psi], h["val_ppl"], np.zeros(len(h)))[0] for lam, h in g.groupby("lam")}
        return float(r[mt.ours] ** 2 - r[0.0] ** 2) if len(r) == 2 else None

    return ctx.seed_measured(m, diff, where, match=mt, excluded=excl)


@claim("fig7_pooled_direction", "Fig 7, Sec. VI-G", "Across λ, higher Ψ_s goes with lower perplexity",
       "negative association", "Pearson r(Ψ_s, validation perplexity) within each seed over every AdamW λ, pooled "
       "(Fisher z, t over seeds)", Region.direction(-1))
def fig7_pooled(ctx: Context) -> Measured:
    m, excl = ctx.rows("adamw", ctx.params["train"]["lambdas"])
    m = m.dropna(subset=[ctx.psi, "val_ppl"])
    where = ctx.where("adamw", sorted(m["lam"].unique()), m)
    if m["lam"].nunique() < 2:
        return none(join("needs two learned λ", collapsed_note(excl)), where, excluded=excl)
    iv = correlation_interval(m[ctx.psi], m["val_ppl"], m["seed"].to_numpy(), kind="pearson",
                              confidence=ctx.confidence)
    return Measured(iv, where, join("λd enters Ψ_s: pooled across λ, −λd dominates Ψ_s's spread",
                                    collapsed_note(excl)), excluded=excl)


@claim("sec4_psi_rises_with_lam", "Sec. IV (Parameter scaling)", "Higher λ gives larger Ψ_s (Ψ_s ∝ λ²‖θ‖²)",
       "Ψ_s rises with λ", "Pearson r(rank of λ, Ψ_s at the last checkpoint) within each seed over the AdamW λ, "
       "pooled (Fisher z, t over seeds)", Region.direction(+1))
def sec4_psi_lam(ctx: Context) -> Measured:
    m, excl = ctx.rows("adamw", ctx.params["train"]["lambdas"])
    last = m.dropna(subset=[ctx.psi]).sort_values("step").groupby(["lam", "seed"]).tail(1).reset_index(drop=True)
    where = ctx.where("adamw", sorted(last["lam"].unique()), extra=f", last checkpoints of {len(last)} runs")
    if last["lam"].nunique() < 3:
        return none(join("needs three learned λ", collapsed_note(excl)), where, excluded=excl)
    iv = correlation_interval(last["lam"].rank(method="dense"), last[ctx.psi], last["seed"].to_numpy(),
                              kind="pearson", confidence=ctx.confidence)
    mean = ", ".join(f"λ = {x:g}: {g[ctx.psi].mean():.4g}" for x, g in last.groupby("lam"))
    return Measured(iv, where, join(f"mean Ψ_s at the last checkpoint {mean}", collapsed_note(excl)), excluded=excl)
