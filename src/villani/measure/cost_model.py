r"""What a measurement costs, in training-token-equivalents.

The unit is one *training token pass*: what training spends per token (forward, backward
and optimiser step of one predicted token). The 125M rehearsal (``benchmarks/rehearsal.py``,
``benchmarks/README.md``) measured on one CPU core, both in fp32, at d = 1.25·10⁸:

- a Hessian-vector product with the gradient graph kept costs :data:`HVP_TOKEN_COST`
  = 3.41 training token passes per token of its batch;
- building that graph (forward + ``create_graph`` backward) costs :data:`GRAPH_TOKEN_COST`
  = 3.59 per token.

Two further constants are FLOP ratios, not measurements: a plain gradient (forward +
backward, no optimiser step; the step is O(d) per batch, not per token) is
:data:`GRADIENT_TOKEN_COST` = 1, and a forward pass alone (validation loss) is
:data:`FORWARD_TOKEN_COST` = 1/3 (2d of the 6d FLOPs per token).

A measure job's cost is then

.. math::  C = c_{hvp} \sum_{\text{products}} n_p + c_{graph} \sum_{\text{builds}} n_b
             + c_{grad}\, n_{grad} + c_{fwd}\, n_{fwd}

with :math:`n_p` the tokens one product covers, :math:`n_b` those one graph build covers
(a build serves every product applied to it: all of them when the graph is kept, one
block of k vectors when it is rebuilt per ``matmat``), :math:`n_{grad}` the tokens of
plain gradients (gradient noise; ∇L when the graph is not kept) and :math:`n_{fwd}` the
validation tokens. The counts are recorded by every measure JSON (``cost``,
:func:`counts_from_record`); :func:`preset_ratio` sums the planned counts of a preset's
measure jobs (:func:`planned_counts`) over its training tokens. All functions are pure.

**Precision.** The rehearsal ran products and training in the same arithmetic (fp32 on a
CPU), so the constants are ratios at equal throughput. On a GPU, training runs bf16 and
the products at ``measure.precision`` (:mod:`villani.measure.precision_audit`: the
Hutchinson products; Lanczos, SLQ, gradients and forward passes stay fp32 "highest"):
each part of a job is priced × :func:`precision_factor` = peak(training) / peak(its
precision), with the A100's dense peaks (:data:`A100_PEAK_TFLOPS`): 16 at "highest", 2 at
"tf32", 1 at "bf16". :func:`planned_parts` splits a job's counts by precision (the
precision audit's products included), :func:`job_equivalents` prices them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from villani.plan.budget import budget, checkpoint_budget, ds_groups
from villani.plan.frozen import Params, freeze
from villani.plan.schedule import spectrum_at

__all__ = [
    "HVP_TOKEN_COST", "GRAPH_TOKEN_COST", "GRADIENT_TOKEN_COST", "FORWARD_TOKEN_COST", "Constants", "REHEARSAL",
    "Counts", "token_equivalents", "cost_counts", "counts_from_record", "graph_fits", "planned_counts", "Schedule", "TODAY",
    "preset_ratio", "preset_plan", "ds_group_variance", "A100_PEAK_TFLOPS",
    "TRAINING_PRECISION", "precision_factor", "planned_parts", "job_equivalents", "H200_TRAIN_S_PER_TOKEN",
    "H200_HVP_S_PER_TOKEN",
]

HVP_TOKEN_COST = 3.41
GRAPH_TOKEN_COST = 3.59
GRADIENT_TOKEN_COST = 1.0
FORWARD_TOKEN_COST = 1.0 / 3.0

#: Dense peak throughput of one A100 in TFLOP/s, by matmul arithmetic (NVIDIA A100 Tensor Core
#: GPU datasheet, dense, without sparsity): FP32 19.5, TF32 tensor core 156, BF16 tensor core 312.
A100_PEAK_TFLOPS = {"highest": 19.5, "tf32": 156.0, "bf16": 312.0}
#: The arithmetic of training on a GPU (``train.precision: auto`` is bf16 autocast on CUDA).
TRAINING_PRECISION = "bf16"

#: GPT-Neo-125M on one H200 (``benchmarks/gpu_check.sh``, ``benchmarks/README.md``, "GPU check"):
#: bf16 training at the paper's batch of 1 × 512 tokens, 8,609 tokens/s (launch-bound); one fp32
#: ("highest") Hessian-vector product on 32,704 tokens, 3.40 s. Seconds per token of each.
H200_TRAIN_S_PER_TOKEN = 1 / 8_609
H200_HVP_S_PER_TOKEN = 3.40 / 32_704

#: The measured peak of the graph and one product at 125M (benchmarks/README.md, memory probe):
#: 2.96 GiB + 3.95 MiB per token of the batch.
GRAPH_FIXED_BYTES, GRAPH_BYTES_PER_TOKEN = 2.96 * 2**30, 3.95 * 2**20


@dataclass(frozen=True)
class Constants:
    """Per-token costs in training token passes (defaults: :data:`REHEARSAL`)."""

    hvp: float = HVP_TOKEN_COST
    graph: float = GRAPH_TOKEN_COST
    gradient: float = GRADIENT_TOKEN_COST
    forward: float = FORWARD_TOKEN_COST


REHEARSAL = Constants()


@dataclass(frozen=True)
class Counts:
    """What one measure job spent: products and graph builds, and the tokens each covered.

    ``product_tokens`` = Σ over products of the tokens of each; ``build_tokens`` the same
    over graph builds; ``gradient_tokens`` and ``forward_tokens`` those of plain gradients
    and of forward-only passes.
    """

    products: int
    graph_builds: int
    product_tokens: int
    build_tokens: int
    gradient_tokens: int = 0
    forward_tokens: int = 0

    def __post_init__(self):
        for k, v in asdict(self).items():
            if int(v) != v or v < 0:
                raise ValueError(f"Counts.{k}: {v!r} is invalid (expected a non-negative integer)")

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(**{k: getattr(self, k) + getattr(other, k) for k in asdict(self)})

    def scaled(self, n: int) -> "Counts":
        """n jobs of these counts."""
        return Counts(**{k: n * v for k, v in asdict(self).items()})

    @property
    def tokens_per_product(self) -> float:
        return self.product_tokens / self.products if self.products else 0.0


def token_equivalents(c: Counts, k: Constants = REHEARSAL) -> float:
    """C = c_hvp·Σn_p + c_graph·Σn_b + c_grad·n_grad + c_fwd·n_fwd, in training token passes."""
    return (k.hvp * c.product_tokens + k.graph * c.build_tokens + k.gradient * c.gradient_tokens
            + k.forward * c.forward_tokens)


def precision_factor(precision: str, peaks: Mapping[str, float] | None = None) -> float:
    """Training token passes (at :data:`TRAINING_PRECISION`) one token pass at ``precision``
    costs on a device of dense ``peaks`` (TFLOP/s by precision, e.g. :data:`A100_PEAK_TFLOPS`):
    peak(training)/peak(precision) — 16 for "highest" on an A100, 2 for "tf32", 1 for "bf16".
    ``peaks`` None: 1, the rehearsal's equal-arithmetic unit."""
    if peaks is None:
        return 1.0
    if precision not in peaks:
        raise ValueError(f"measure.precision: {precision!r} is invalid (allowed: {', '.join(peaks)})")
    return float(peaks[TRAINING_PRECISION]) / float(peaks[precision])


def job_equivalents(c: "Counts | Mapping[str, Counts]", k: Constants = REHEARSAL,
                    peaks: Mapping[str, float] | None = None) -> float:
    """Token-equivalents of one job: its counts by precision (:func:`planned_parts`; plain
    :class:`Counts` are all "highest"), each part × :func:`precision_factor` on ``peaks``."""
    parts = {"highest": c} if isinstance(c, Counts) else c
    return sum(precision_factor(p, peaks) * token_equivalents(v, k) for p, v in parts.items())


def cost_counts(products: int, tokens: int, *, graph_kept: bool, noise_tokens: int, val_tokens: int,
                hutchinson_products: int = 0, hutchinson_calls: int = 0, kept_builds: int = 1,
                subset: Mapping[str, int] | None = None) -> dict:
    """The ``cost`` object of a measure JSON (:class:`Counts` and
    its token-equivalents): ``products`` on the whole measurement set of ``tokens``;
    ``kept_builds`` graph builds when ModelHessian kept the graph (one per precision the
    job's products used), else one per Lanczos/SLQ product and one per Hutchinson or audit
    operator call (``measure.probe_block`` probes each), ∇L then by a plain gradient.
    ``subset``: the doubly stochastic trace's ``products`` and graph ``builds`` on
    ``tokens`` tokens each (its audit's included); ``tokens_per_product`` is then the mean
    over all products (rounded)."""
    builds = kept_builds if graph_kept else products - hutchinson_products + hutchinson_calls
    c = Counts(products, builds, products * tokens, builds * tokens, noise_tokens + (0 if graph_kept else tokens),
               val_tokens)
    if subset is not None:
        n, b, t = int(subset["products"]), int(subset["builds"]), int(subset["tokens"])
        c = c + Counts(n, b, n * t, b * t)
    return {**asdict(c), "graph_kept": bool(graph_kept), "tokens_per_product": int(tokens) if subset is None else int(round(c.tokens_per_product)),
            "training_token_equivalents": token_equivalents(c)}


def counts_from_record(rec: Mapping[str, Any], path="measure JSON") -> Counts:
    """The :class:`Counts` a measure JSON recorded in its ``cost`` object (one-line error if absent)."""
    cost = rec.get("cost")
    if not isinstance(cost, Mapping):
        raise ValueError(f"{path}: cost: missing (expected the job's counts: {', '.join(Counts.__dataclass_fields__)})")
    try:
        return Counts(**{k: int(cost[k]) for k in Counts.__dataclass_fields__})
    except KeyError as e:
        raise ValueError(f"{path}: cost.{e.args[0]}: missing (expected a non-negative integer)") from None


def graph_fits(tokens: int, memory_bytes: float, *, fraction: float = 0.7) -> bool:
    """Whether the gradient graph of ``tokens`` tokens and one product fit in ``fraction`` of
    ``memory_bytes`` (the 125M memory model; ModelHessian keeps the graph within 70 % of free memory)."""
    return GRAPH_FIXED_BYTES + GRAPH_BYTES_PER_TOKEN * tokens < fraction * memory_bytes


@dataclass(frozen=True)
class Schedule:
    """How a preset's measure jobs spend their products: the levers of the cost.

    ``spectrum_every``: the top-k Lanczos run and the SLQ density at every n-th checkpoint
    and the last (:func:`spectrum_at`; 1 = every checkpoint, the default), the trace elsewhere
    without a Lanczos basis. ``block``: probes applied per graph build when the graph is
    not kept (1 = one build per product, the default). ``ds_blocks``: measurement blocks per
    doubly stochastic group at the checkpoints without a spectrum (0: every probe covers
    the whole measurement set, the default); ``ds_probes`` probes per group.
    """

    spectrum_every: int = 1
    block: int = 1
    ds_blocks: int = 0
    ds_probes: int = 1

    @classmethod
    def of(cls, me: Params) -> "Schedule":
        """The schedule a preset's ``measure`` settings ask for: ``spectrum_every``,
        ``probe_block`` (probes per build, and per doubly stochastic group), ``ds_blocks``."""
        k = me.probe_block
        return cls(spectrum_every=me.spectrum_every, block=k, ds_blocks=me.ds_blocks or 0, ds_probes=k)


TODAY = Schedule()


def planned_counts(me: Params, **kw) -> Counts:
    """All the counts of one measure job, whatever their precision (:func:`planned_parts`)."""
    return sum(planned_parts(me, **kw).values(), Counts(0, 0, 0, 0))


def planned_parts(me: Params, *, tokens: int, block_tokens: int, probes: int, slq_starts: int, keeps_graph: bool,
                  spectrum: bool = True, schedule: Schedule = TODAY, noise_tokens: int = 0, val_tokens: int = 0,
                  precision: str = "highest", audit: int = 0) -> dict[str, Counts]:
    """The counts of one measure job of ``measure`` settings ``me`` on ``tokens`` measurement
    tokens (blocks of ``block_tokens`` predicted tokens), by the precision they run at:
    ``probes`` Hutchinson probes (doubly stochastic: groups × probes per group) at
    ``precision``, ``slq_starts`` SLQ starts, the Lanczos run, gradients and forward passes
    at "highest"; a graph kept for the whole job (one build per precision) or rebuilt for
    every product (every ``schedule.block`` Hutchinson probes). ``audit``: the products of
    the precision audit — one operator call at "highest", or in bf16 where the trace's were
    "highest" (one build: its own graph, or the "highest" one rebuilt after the trace's)."""
    lanczos = budget(me, spectrum=spectrum, slq_starts=slq_starts, trace=probes).spectrum
    ds = bool(schedule.ds_blocks) and not spectrum  # the spectrum checkpoints keep the fixed set (deflated)
    full_set = lanczos > 0 or not ds  # products on the whole measurement set
    if keeps_graph and full_set:  # one build, kept: it gives ∇L and serves every full-set product
        base = Counts(0, 1, 0, tokens)
    else:  # ∇L by a plain gradient; every full-set product rebuilds the graph (in blocks of `block`)
        base = Counts(0, lanczos, 0, lanczos * tokens, tokens)
    spec = Counts(lanczos, 0, lanczos * tokens, 0)
    trace_tokens = schedule.ds_blocks * block_tokens if ds else tokens
    if ds:
        groups = ds_groups(probes, schedule.ds_probes)
        hutch = Counts(groups * schedule.ds_probes, groups, groups * schedule.ds_probes * trace_tokens,
                       groups * trace_tokens)
    elif keeps_graph:  # the trace's own graph where its precision is not "highest"
        own = int(precision != "highest")
        hutch = Counts(probes, own, probes * tokens, own * tokens)
    else:
        builds = math.ceil(probes / max(1, schedule.block))
        hutch = Counts(probes, builds, probes * tokens, builds * tokens)
    parts = {"highest": base + spec + Counts(0, 0, 0, 0, noise_tokens, val_tokens)}
    parts[precision] = parts.get(precision, Counts(0, 0, 0, 0)) + hutch
    if audit:
        at = "bf16" if precision == "highest" else "highest"
        parts[at] = parts.get(at, Counts(0, 0, 0, 0)) + Counts(audit, 1, audit * trace_tokens, trace_tokens)
    return parts


def ds_group_variance(var_between_one: float, var_probe: float, blocks: int, n_blocks: int, per_group: int) -> float:
    r"""Variance of one doubly stochastic group mean :math:`g = \frac1k\sum_i v_iᵀ H_B v_i`
    with B a uniform sample of b of the n measurement blocks (without replacement) and
    k probes: :math:`\operatorname{Var} g = \frac{n-b}{(n-1)\,b}\,\sigma^2_{B,1} + \sigma^2_v/k`,
    :math:`\sigma^2_{B,1}` the variance of one block's trace over blocks and
    :math:`\sigma^2_v` a probe's variance on B (taken as that on the whole set, a lower
    bound: ‖H_B‖_F² ≥ ‖H‖_F² on average)."""
    if not 1 <= blocks <= n_blocks:
        raise ValueError(f"blocks: {blocks} is invalid (expected 1..{n_blocks})")
    fpc = (n_blocks - blocks) / (n_blocks - 1) if n_blocks > 1 else 0.0
    return fpc * var_between_one / blocks + var_probe / max(1, per_group)


def preset_ratio(jobs: list[tuple[int, "Counts | Mapping[str, Counts]"]], train_tokens: int,
                 k: Constants = REHEARSAL, peaks: Mapping[str, float] | None = None) -> float:
    """Σ over (number of jobs, counts per job — :class:`Counts` or by precision) of
    token-equivalents (:func:`job_equivalents` on a device of ``peaks``), over the training tokens."""
    if train_tokens <= 0:
        raise ValueError(f"train_tokens: {train_tokens} is invalid (expected > 0)")
    return sum(n * job_equivalents(c, k, peaks) for n, c in jobs) / train_tokens


def preset_plan(params: Params, *, probes: int, memory_bytes: float, schedule: Schedule = TODAY,
                trace_probes: int | None = None, d: int = 125_198_592, val_tokens: int = 0,
                sweep_at_ends: bool | None = None, precision: str | None = None) -> dict:
    """Every measure job of a preset (every run × checkpoint) as (count, its counts by
    precision, :func:`planned_parts`), with ``probes`` Hutchinson probes at spectrum
    checkpoints and ``trace_probes`` (default the same) elsewhere, at ``precision`` (default
    the preset's ``measure.precision``), and the precision audit's products; the graph kept
    if it fits ``memory_bytes`` (:func:`graph_fits`); the gradient-noise batches at the first
    and last checkpoint; ``val_tokens`` forward tokens per job. Training tokens: runs ×
    steps × batch × sequence length. With ``sweep_at_ends`` the lr/warm-up sweep arms are
    measured at their first and last checkpoint only (default: the preset's
    ``measure.sweep_arms``, :func:`villani.plan.schedule.measured_steps`)."""
    from villani.measure.precision_audit import AUDIT_PRODUCTS
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps, measured_steps

    t, me, T = params.train, params.measure, params.data.seq_len
    precision = precision or me.precision
    if sweep_at_ends is not None:  # the plan's own choice, else the preset's measure.sweep_arms
        params = freeze({**params, "measure": {**me, "sweep_arms": "ends" if sweep_at_ends else "every"}})
    measured = [set(measured_steps(params, r.variant)) for r in runs(params)]
    n_runs, steps = len(measured), checkpoint_steps(t)
    block_tokens = T - 1
    tokens = me.blocks * block_tokens
    keeps = graph_fits(tokens, memory_bytes)
    noise = me.noise_sigma_batches * t.batch_size * block_tokens
    jobs = []
    for step in steps:
        spectrum = spectrum_at(schedule.spectrum_every, step, steps)
        c = planned_parts(me, tokens=tokens, block_tokens=block_tokens,
                          probes=probes if spectrum or trace_probes is None else trace_probes,
                          slq_starts=checkpoint_budget(me, d, step, steps).slq_starts, keeps_graph=keeps,
                          spectrum=spectrum,
                          schedule=schedule, noise_tokens=noise if step in (steps[0], steps[-1]) else 0,
                          val_tokens=val_tokens, precision=precision, audit=AUDIT_PRODUCTS)
        jobs.append((sum(step in m for m in measured), c))
    return {"runs": n_runs, "steps": steps, "jobs": jobs, "keeps_graph": keeps, "tokens_per_product": tokens,
            "train_tokens": n_runs * t.steps * t.batch_size * T, "precision": precision}
