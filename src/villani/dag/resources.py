r"""What a ``train`` or ``measure`` job asks the cluster for, derived from the work it does.

A job's request is its work at a per-token rate of GPT-Neo-125M on one A100 (measured on
an H200, carried to an A100 below), with headroom, growing on every retry (``attempt`` = 1, 2, 3):

.. math::

    \text{runtime} = \Big\lceil \tfrac{S + h_t \cdot W}{60} \Big\rceil \cdot \text{attempt}\ \text{min},
    \qquad
    \text{mem\_mb} = \min\big(\lceil h_m \cdot M / 10^6 \rceil \cdot \text{attempt},\ 128\,000\big)

with S = :data:`STARTUP_S` (start-up, loading, checkpoint writes), h_t = :data:`TIME_HEADROOM`,
h_m = :data:`MEMORY_HEADROOM`, and the work W (seconds) and host memory M (bytes):

* **train**, a segment of n = end − start steps of B·T tokens (``train.batch_size`` blocks
  of ``data.seq_len``; a per-run job, ``jobs.train: run``: the sum over its segments, once
  S): W = n·B·T·r_train; M = M_train + b·(B·T − 512). A job of the s seeds of one (update
  rule, λ) side by side, k at a time on its device (``jobs.runs_per_device`` = k ≥ 2,
  :func:`runs_per_device`): W·s — no gain from sharing the device is assumed until one is
  measured — and M·min(k, s);
* **measure**, one checkpoint (a per-run job, ``jobs.measure: run``: the sum over the
  run's checkpoints, once S): W = K·N·r_hvp with K the most HVPs the job may take
  (Lanczos steps + SLQ starts after the first × SLQ steps + ``num_probes``: Stein's rule
  stops at or below it; at a checkpoint without a spectrum, ``measure.spectrum_every``,
  ``num_probes`` only — a doubly stochastic trace's cap is the same tokens) and
  N = ``measure.blocks``·(T − 1) tokens per product;
  M = M_measure + b·(``measure.batch_size``·(T − 1) − 511).

The rates are GPT-Neo-125M's, measured on one H200 by ``benchmarks/gpu_check.sh``
(``benchmarks/README.md``, "GPU check"): r_train = 1/8,609 s per token, bf16 training at the
paper's batch of 1 × 512 tokens — a step there is bound by kernel launches (59 ms at 1 × 512
tokens, 60 ms at 8 × 512), which an A100 pays alike, so the rate is taken as it is;
r_hvp = 3.40 s per fp32 ("highest") product of 32,704 tokens (64 blocks in micro-batches of
8, peak 38.8 GiB) × 67/19.5, the ratio of the H200's fp32 peak to an A100's — the product is
compute-bound — ≈ 11.7 s on an A100. r_train is the eager step's; a GPU trains with the
captured step by default (``train.compile: auto``, :mod:`villani.training.step`), whose rate is
not measured on a GPU yet, so the requests keep the eager one. M_train, M_measure: the peak RSS of the 125M train job
(1 × 512 tokens) and measure job (511 tokens per product) of the CPU rehearsal, every tensor
on the host — an upper bound on a GPU job's host memory; b = 3.95 MiB per token, the
probe's growth of the gradient graph plus one product with the tokens of a batch.
"""

from __future__ import annotations

import math
from typing import Mapping

from villani.measure.cost_model import H200_HVP_S_PER_TOKEN, H200_TRAIN_S_PER_TOKEN
from villani.plan.budget import checkpoint_budget
from villani.plan.schedule import checkpoint_steps, job_steps, segment_start

GiB, MiB = 2**30, 2**20
TRAIN_S_PER_TOKEN = H200_TRAIN_S_PER_TOKEN  # ≈ 1.16e-4 s per training token (H200 measured, launch-bound: A100 alike)
H200_OVER_A100_FP32 = 67.0 / 19.5  # fp32 peak TFLOP/s, H200 SXM over A100
HVP_S_PER_TOKEN = H200_HVP_S_PER_TOKEN * H200_OVER_A100_FP32  # ≈ 3.57e-4 s per token of one product on an A100
TRAIN_RSS_BYTES = 5.20 * GiB  # at 512 tokens per step
MEASURE_RSS_BYTES = 17.12 * GiB  # at 511 tokens per product
GRAPH_BYTES_PER_TOKEN = 3.95 * MiB
D_125M = 125_198_592  # parameters of GPT-Neo-125M: how many SLQ starts slq_cdf_tol asks for
STARTUP_S = 300.0
TIME_HEADROOM = 1.5
MEMORY_HEADROOM = 1.5
MEM_CAP_MB = 128_000  # an A100 node's share per GPU on most sites; a larger request pends forever
# A training process's GPU memory at GPT-Neo-125M, from tensor sizes [not measured on a GPU]:
# 18 bytes per parameter (fp32 weights, gradients and Adam's two moments, the bf16 copies of
# the weights autocast makes), 1.5 GiB for the CUDA context and the captured graphs' memory
# pool, 2 MiB per token of a batch (activations, fp32 attention weights, logits).
GPU_BYTES = 80e9  # the profile's A100 80GB
TRAIN_GPU_BYTES = 18 * D_125M + 1.5 * GiB
TRAIN_GPU_BYTES_PER_TOKEN = 2 * MiB


def train_gpu_bytes(params: Mapping) -> float:
    """GPU memory of one training process (GPT-Neo-125M's, :data:`TRAIN_GPU_BYTES`)."""
    t = params["train"]
    return TRAIN_GPU_BYTES + TRAIN_GPU_BYTES_PER_TOKEN * t["batch_size"] * params["data"]["seq_len"]


def runs_per_device(params: Mapping) -> int:
    """``jobs.runs_per_device``: the number given, or for ``auto`` as many of a (update rule,
    λ)'s seeds as fit 90 % of :data:`GPU_BYTES` at :func:`train_gpu_bytes` each (at least 1)."""
    k = params["jobs"]["runs_per_device"]
    if k != "auto":
        return k
    fit = math.floor(0.9 * GPU_BYTES / train_gpu_bytes(params))
    return max(1, min(len(params["train"]["seeds"]), fit))


def train_work(params: Mapping, end: int) -> tuple[float, float]:
    """(seconds on one A100, host bytes) of the training segment ending at step ``end`` —
    of every seed of its (update rule, λ) when they train side by side (:func:`runs_per_device` ≥ 2)."""
    t = params["train"]
    tokens_per_step = t["batch_size"] * params["data"]["seq_len"]
    steps = int(end) - segment_start(t, int(end))
    k, seeds = runs_per_device(params), len(t["seeds"])
    runs, at_once = (seeds, min(k, seeds)) if k >= 2 else (1, 1)
    return (runs * steps * tokens_per_step * TRAIN_S_PER_TOKEN,
            at_once * (TRAIN_RSS_BYTES + GRAPH_BYTES_PER_TOKEN * max(tokens_per_step - 512, 0)))


def max_hvps(measure: Mapping, step: int, steps: list[int]) -> int:
    """The most Hessian-vector products a measure job of checkpoint ``step`` takes
    (:func:`villani.plan.budget.checkpoint_budget` at GPT-Neo-125M's d)."""
    return checkpoint_budget(measure, D_125M, int(step), steps).total


def measure_work(params: Mapping, step: int) -> tuple[float, float]:
    """(seconds on one A100, host bytes) of measuring the checkpoint at ``step``."""
    m, seq = params["measure"], params["data"]["seq_len"]
    tokens = m["blocks"] * (seq - 1)
    batch_tokens = min(m["batch_size"], m["blocks"]) * (seq - 1)
    hvps = max_hvps(m, int(step), checkpoint_steps(params["train"]))
    return (hvps * tokens * HVP_S_PER_TOKEN,
            MEASURE_RSS_BYTES + GRAPH_BYTES_PER_TOKEN * max(batch_tokens - 511, 0))


def run_work(rule: str, params: Mapping) -> tuple[float, float]:
    """(seconds, host bytes) of a job per run (``jobs.<rule>: run``): the work of every
    segment end (train) or checkpoint (measure) in one process; its largest memory."""
    works = [_estimate(rule)(params, s) for s in job_steps(rule, params["train"])]
    return sum(w[0] for w in works), max(w[1] for w in works)


def runtime_min(seconds: float, attempt: int) -> int:
    """Minutes to ask for: start-up plus the work with headroom, × attempt."""
    return math.ceil((STARTUP_S + TIME_HEADROOM * seconds) / 60) * int(attempt)


def mem_mb(nbytes: float, attempt: int) -> int:
    """Megabytes to ask for: the peak with headroom, × attempt, at most :data:`MEM_CAP_MB`."""
    return min(math.ceil(MEMORY_HEADROOM * nbytes / 1e6) * int(attempt), MEM_CAP_MB)


def _estimate(rule: str):
    """The row's ``estimate`` (:data:`villani.plan.stages.TABLE`): (seconds, host bytes) of a
    job of ``rule`` from the parameters and its step."""
    from villani.plan.stages import function, stage

    return function(stage(rule).estimate)


def _work(rule: str, params: Mapping, step: int | None) -> tuple[float, float]:
    return run_work(rule, params) if step is None else _estimate(rule)(params, step)


def job_runtime(rule: str, params: Mapping, step: int | None, attempt: int) -> int:
    """``runtime`` (minutes) of a ``train`` (step = segment end) or ``measure`` job (step =
    the checkpoint); step None: a job per run (:func:`run_work`)."""
    return runtime_min(_work(rule, params, step)[0], attempt)


def job_mem_mb(rule: str, params: Mapping, step: int | None, attempt: int) -> int:
    """``mem_mb`` of a ``train`` or ``measure`` job (step None: a job per run)."""
    return mem_mb(_work(rule, params, step)[1], attempt)
