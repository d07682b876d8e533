r"""Claims a laptop run cannot decide: each row says what would test it (the preset, the machine).

The GPU-hours of each preset are in the README's "What a preset costs" (scaled from
benchmarks/rehearsal.py); these rows name the preset and the measurement it would add.
"""

from __future__ import annotations

from villani.claims.context import Context, none
from villani.claims.registry import Measured, claim
from villani.claims.verdict import Region


def _untestable(ctx: Context, what: str) -> Measured:
    return none(f"untestable at this scale: {what}", f"{ctx.dataset} (d = the embedded model's)", testable=False)


@claim("table1_guidelines", "Table I", "The paper's hyper-parameters follow its Villani-guided rules (η ≤ λ/(4σ²), "
       "λ in the quadratic-dominant region)", "followed", "fraction of Table I's rules the paper's own runs meet",
       Region(1.0, 1.0, text="= 1"))
def table1(ctx: Context) -> Measured:
    return _untestable(ctx, "the rules need σ² and ‖θ‖ of GPT-Neo-125M on PTB at η = 10⁻⁴; what would test it: "
                       "configs/ptb.yaml, whose bounds table checks η ≤ λ/(4σ²) per checkpoint")


@claim("appA_wmax_c1", "App. A, eq. 54–55", "W_max ≈ 0.9 for GPT-Neo-125M at λ = 10⁻³, giving C₁ ≈ 7.6",
       "W_max 0.9, C₁ 7.6", "largest operator norm of a weight matrix over training", Region.around(0.9, 0.1))
def appA(ctx: Context) -> Measured:
    return _untestable(ctx, "W_max is a property of GPT-Neo-125M's trained weights; what would test it: the "
                       "operator norms of configs/ptb.yaml's checkpoints at λ = 10⁻³ (not measured by any stage yet)")


@claim("fig10_single_gpu_1b", "Fig 10, Sec. VI-I", "A single GPU supports trace estimation up to ~1B parameters",
       "~1B", "largest d whose HVP fits one GPU's memory", Region.around(1e9, 0.5, relative=True))
def fig10_limit(ctx: Context) -> Measured:
    return _untestable(ctx, "needs a GPU; what would test it: `villani cost` on one (the cost stage's memory-vs-d "
                       "fit, Fig 10) extrapolated to the GPU's memory")


@claim("fig10_memory_savings", "Fig 10, Sec. VI-I", "Mixed precision, checkpointing and block-wise HVP cut memory "
       "by 40–90%", "40–90%", "memory saved by each technique / fp32 full-graph HVP memory", Region(0.4, 0.9, text="in [0.4, 0.9]"))
def fig10_savings(ctx: Context) -> Measured:
    return _untestable(ctx, "needs a GPU and the three techniques' HVPs; what would test it: `villani cost` with "
                       "each technique on one GPU at d ≥ 10⁸")


@claim("efficiency_time_to_target", "Sec. VI (efficiency)", "Stronger λ reaches the target perplexity in less "
       "wall-clock time", "faster with λ", "wall-clock to the paper's target perplexity", Region.direction(-1))
def time_to_target(ctx: Context) -> Measured:
    m = ctx.m[(ctx.m["lam"] > 0) & ~ctx.m["run_collapsed"]]
    here = ""
    if len(m):
        d = float((m["lam_d"] / m["lam"]).median())
        here = f" (the lowest validation perplexity here is {ctx.m['val_ppl'].min():.4g} at d = {d:,.0f})"
    return _untestable(ctx, "the paper's target perplexities are those of GPT-Neo-125M on PTB/WikiText-103"
                       f"{here}; what would test it: configs/paper.yaml")
