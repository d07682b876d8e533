r"""Sec. VI-E and Fig 5's caption: noise injection "validates" the Langevin connection.

The paper overlays AdamW runs with Gaussian gradient noise (Table I's N(0, 0.05²) per
coordinate) on Fig 5's training curves: they "mimic Langevin dynamics and validate the role of
noise in achieving consistent mixing behavior". Theorem 2's contraction rate 2η/C_LS(βF) does
not depend on the injected noise — the noise adds only the floor ηLσ²/4 of eq. (41) — so what
a noise-injected run can validate is that it converges as the run without noise does. Our arm
is ``adamw_noise`` (:mod:`villani.plan.runs`: AdamW on the minibatch gradient + ξ ~ N(0, 0.05²·I)
before clipping, then √(2η/β)·Z with Table I's β), at the λ of ``train.adamw_noise.lambdas``,
each run paired with the AdamW run of the same λ, seed, initialisation and batches.

Statistic: per seed, the noise-injected run's fall of validation loss from step 0 to its last
checkpoint over the noiseless run's, averaged over the arm's λ; the t interval of the log over
seeds, back-transformed (a ratio). "Consistent" is read as no worse than 90% of the noiseless
fall (region ≥ 0.9), fixed before the runs. A noise-injected run that does not beat the unigram
model decides nothing (docs/claims.md); the finding ``sec6e_noise_arm_learns`` counts the runs
that do. Table I's σ is per coordinate, so the injected ξ has norm ≈ σ√d — at a transformer's d
far above ‖∇L‖ (:func:`noise_size`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from villani.claims.catalogue.context import Context, join, left_out_note, none, per_seed_text
from villani.claims.catalogue.paper import PAPER_D, PAPER_NOISE_STD
from villani.claims.catalogue.registry import FINDINGS, Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.statistics.intervals import proportion_interval, seed_interval

__all__ = ["loss_fall", "noise_size"]


def loss_fall(m: pd.DataFrame) -> pd.Series:
    """Per run (variant, λ, seed): validation loss at its first checkpoint − at its last."""
    runs = m.sort_values("step").groupby(["variant", "lam", "seed"])["val_loss"]
    return runs.first() - runs.last()


@claim("sec6e_noise_injection", "Sec. VI-E, Fig 5 caption", "Training runs with Gaussian noise injection mimic "
       "Langevin dynamics and validate the role of noise in achieving consistent mixing", "noisy runs converge as "
       "the others", "per seed: validation-loss fall (step 0 → last) of the noise-injected AdamW run (Table I's "
       "N(0, 0.05²)) / that of the AdamW run at the same λ, seed and batches; t interval of the log over seeds",
       Region.at_least(0.9))
def sec6e_noise(ctx: Context) -> Measured:
    lams = list(ctx.params.train.adamw_noise.lambdas)
    where = ctx.where("adamw_noise vs adamw", lams)
    if not lams:
        return none("no noise-injected arm in this configuration (train.adamw_noise.lambdas is empty)", where)
    both = ctx.m[ctx.m["variant"].isin(("adamw", "adamw_noise")) & ctx.m["lam"].isin(lams)].reset_index(drop=True)
    size = noise_size(ctx, both)
    m, excl = ctx.learned(both)
    fall = loss_fall(m).unstack("variant")
    if "adamw_noise" not in fall or "adamw" not in fall:
        return none(join("no learned pair of a noise-injected run and its AdamW run: no claim is decided on a run "
                         "that does not beat the unigram model (sec6e_noise_arm_learns counts them)", size,
                         left_out_note(excl)), where, excluded=excl)
    pairs = fall.dropna(subset=["adamw", "adamw_noise"])
    ratio = (pairs["adamw_noise"] / pairs["adamw"]).groupby(level="seed").apply(lambda r: float(np.exp(np.log(r).mean())))
    if (ratio <= 0).any():
        return none(join("a noise-injected run's validation loss rose over its run", left_out_note(excl)), where,
                    excluded=excl)
    iv = seed_interval(ratio.to_numpy(float), ctx.confidence, scale="log")
    return Measured(iv, ctx.where("adamw_noise vs adamw", lams, m),
                    join(per_seed_text({int(s): v for s, v in ratio.items()}),
                         "falls: " + ", ".join(f"λ = {lam:g} seed {int(s)}: {r.adamw_noise:.3g} vs {r.adamw:.3g}"
                                                for (lam, s), r in pairs.iterrows()), size, left_out_note(excl)),
                    excluded=excl)


def noise_size(ctx: Context, m: pd.DataFrame) -> str:
    """The injected noise against the gradient: ‖ξ‖ ≈ σ√d here and at the paper's d, and the median
    ‖∇L‖ of the AdamW checkpoints after step 0 (Table I's σ is per coordinate, so ‖ξ‖ grows with √d)."""
    std = ctx.params.train.adamw_noise.grad_std
    plain = m[(m["variant"] == "adamw") & (m["step"] > 0)]
    if plain.empty:
        return ""
    d = int(plain["d"].iloc[0])
    g = float(np.sqrt(plain["grad_L_sq_norm"].median()))
    return (f"the injected ξ has norm ≈ σ√d = {std:g}·√{d:,} = {std * np.sqrt(d):.3g} against a median ‖∇L‖ of "
            f"{g:.3g} at the AdamW checkpoints (σ = {std:g}; Table I's {PAPER_NOISE_STD:g} per coordinate is "
            f"{PAPER_NOISE_STD * np.sqrt(PAPER_D):.3g} at the paper's d)")


@claim("sec6e_noise_arm_learns", "Sec. VI-E, Table I (our arm)", "AdamW with Table I's gradient noise N(0, 0.05²) "
       "per coordinate — the paper's noise-injection runs — trains the model", "learns",
       "fraction of the noise-injected AdamW runs whose final validation perplexity beats the corpus's unigram "
       "model, Clopper–Pearson over runs", Region.at_least(0.95), table=FINDINGS)
def sec6e_noise_learns(ctx: Context) -> Measured:
    """The finding a noise arm that does not learn is: no claim of the paper is decided on it."""
    lams = list(ctx.params.train.adamw_noise.lambdas)
    last = ctx.m[ctx.m["variant"] == "adamw_noise"].sort_values("step").groupby(["lam", "seed"]).tail(1)
    where = ctx.where("adamw_noise", lams, extra=f", {len(last)} runs (last checkpoint each)")
    if last.empty:
        return none("no noise-injected run in this configuration (train.adamw_noise.lambdas is empty)", where)
    learned = int(last["run_learned"].sum())
    both = ctx.m[ctx.m["variant"].isin(("adamw", "adamw_noise")) & ctx.m["lam"].isin(lams)]
    finals = ", ".join(f"λ = {r.lam:g} seed {int(r.seed)}: {r.val_ppl:.4g}" for r in last.itertuples())
    return Measured(proportion_interval(learned, len(last), ctx.confidence), where,
                    join(f"{learned} of {len(last)} runs learned (unigram {ctx.baseline:.4g}); final validation "
                         f"perplexity {finals}", noise_size(ctx, both)))
