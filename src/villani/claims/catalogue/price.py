r"""What deciding a *needs scale* claim costs: the runs that would decide it, in GPU-hours.

A design is the paper's own experiment (Table I, Table III, Sec. VI): ``runs`` training
runs of GPT-Neo-125M (λ values × seeds) of T steps at 1 × 512 tokens, each measured at
``checkpoints`` checkpoints by K Hessian-vector products on N = 32,704 tokens (the presets'
64 blocks of 511 predicted tokens). Its price on one H200 is

.. math:: h = \frac{R\,T\cdot 512\; r_{train} + R\,C\,K\,N\; r_{hvp}}{3600}

with the rates measured on an H200 by ``benchmarks/gpu_check.sh``
(:data:`villani.measure.cost_model.H200_TRAIN_S_PER_TOKEN`, 8,609 training tokens/s;
:data:`~villani.measure.cost_model.H200_HVP_S_PER_TOKEN`, 3.40 s per fp32 product of 32,704
tokens) and K = :data:`PRODUCTS_PER_CHECKPOINT` = 76, the products one checkpoint took on
the trained default model (the 60-step top-20 Lanczos run plus Stein's probes for a ±2 %
trace, ``benchmarks/measure.py --mode levers``; ``docs/running/performance.md``, "What a preset costs"). Start-up and
validation are not counted; an A100 trains at about the same rate (launch-bound) and runs
a product ≈ 3.4× slower.

A design may also be a GPU memory sweep (Fig 10): ``products`` products at each model size
``d`` of the sweep, a product at d costing d/1.25·10⁸ of GPT-Neo-125M's.
"""

from __future__ import annotations

from dataclasses import dataclass

from villani.claims.catalogue.context import Context
from villani.claims.catalogue.paper import PAPER_D, PAPER_SEEDS, PAPER_STEPS, PTB_TOKENS_TABLE2, WT103_EPOCHS, WT103_STEPS
from villani.plan.paper_lambda import PAPER_EPOCHS, PAPER_TOKENS_PER_STEP
from villani.claims.catalogue.registry import Measured
from villani.measure.cost_model import H200_HVP_S_PER_TOKEN, H200_TRAIN_S_PER_TOKEN

__all__ = ["Design", "DESIGNS", "PRODUCTS_PER_CHECKPOINT", "TOKENS_PER_PRODUCT", "gpu_hours", "needs_scale"]

#: Products per measured checkpoint on the trained default model (benchmarks/README.md, "levers").
PRODUCTS_PER_CHECKPOINT = 76
#: Tokens of one product: the presets' 64 measurement blocks of 511 predicted tokens.
TOKENS_PER_PRODUCT = 64 * 511
TOKENS_PER_STEP = PAPER_TOKENS_PER_STEP  # Table I: batch 512 tokens


@dataclass(frozen=True)
class Design:
    """The runs (or, ``sizes``: a memory sweep) that would decide a claim, and where they are configured."""

    what: str
    runs: int = 0
    steps: int = 0
    checkpoints: int = 0
    sizes: tuple[float, ...] = ()
    products: int = 0

    def with_runs(self, runs: int) -> "Design":
        return Design(self.what, runs, self.steps, self.checkpoints, self.sizes, self.products)


#: The paper's experiments, per seed and λ (``with_runs`` scales them to the λ values a claim needs).
DESIGNS = {
    "ptb": Design(f"the paper's PTB design (configs/ptb.yaml): GPT-Neo-125M on PTB ({PTB_TOKENS_TABLE2:,} tokens), {PAPER_EPOCHS} epochs = "
                  f"{PAPER_STEPS:,} steps of 512 tokens, 60 measured checkpoints per run", PAPER_SEEDS, PAPER_STEPS, 60),
    "wikitext103": Design(f"the paper's WikiText-103 design (configs/wikitext103.yaml): GPT-Neo-125M on WikiText-103, {WT103_EPOCHS} epochs = "
                          f"{WT103_STEPS:,} steps of 512 tokens, 12 measured checkpoints per run", PAPER_SEEDS,
                          WT103_STEPS, 12),
    "gpu_memory": Design("`villani cost` on one GPU: the HVP's time and peak memory at d = 1.25·10⁸ … 10⁹ "
                         "(Fig 10's memory-vs-d fit)", sizes=(PAPER_D, 2.5e8, 5e8, 1e9), products=4),
}


def gpu_hours(design: Design) -> float:
    """H200 GPU-hours of ``design`` (module docstring)."""
    train = design.runs * design.steps * TOKENS_PER_STEP * H200_TRAIN_S_PER_TOKEN
    measure = design.runs * design.checkpoints * PRODUCTS_PER_CHECKPOINT * TOKENS_PER_PRODUCT * H200_HVP_S_PER_TOKEN
    sweep = sum(design.products * TOKENS_PER_PRODUCT * H200_HVP_S_PER_TOKEN * d / PAPER_D for d in design.sizes)
    return (train + measure + sweep) / 3600.0


def needs_scale(ctx: Context, why: str, design: str = "ptb", *, lams: int = 1, what: str = "",
                measured: Measured | None = None) -> Measured:
    """A claim this scale cannot decide: ``why`` (the reason), what would decide it — ``design``
    at ``lams`` λ values × the paper's seeds, and ``what`` to compute there — and its price.
    ``measured``: our statistic, kept in the row beside the reason (it decides nothing)."""
    d = DESIGNS[design]
    d = d.with_runs(d.runs * lams) if d.runs else d
    h = gpu_hours(d)
    runs = f" ({d.runs} runs: {lams} λ × {PAPER_SEEDS} seeds)" if d.runs else ""
    hours = f"{h:,.0f}" if h >= 10 else f"{h:.2g}"
    decides = f"{d.what}{runs}" + (f"; {what}" if what else "") + f" — ≈ {hours} H200 GPU-hours (claims.price)"
    note = f"untestable at this scale: {why}"
    if measured is None:
        return Measured(None, f"{ctx.dataset}: nothing at this scale decides it", note, testable=False,
                        decides=decides, price_gpu_h=h)
    return Measured(measured.interval, measured.measured_on, "; ".join(x for x in (note, measured.note) if x),
                    match=measured.match, units=measured.units, testable=False, excluded=measured.excluded,
                    decides=decides, price_gpu_h=h)
