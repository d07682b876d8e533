"""The params digest of a job: a hash of exactly the parameters the job reads.

A job's digest changes exactly when one of the keys it reads changes, so Snakemake's
``params`` rerun trigger re-runs only the jobs whose inputs changed (editing one λ re-runs
that λ's branch: λ, seed and step are wildcards, never part of a digest). Training
segments also store :func:`run_digest` in their checkpoints and work state and refuse to
continue from a state written under other parameters. ``tests/workflow/test_dvc.py``
checks that each DVC stage's ``params:`` names the same keys (:func:`stage_keys`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

from villani.plan.layout import format_lam
from villani.plan.runs import overridden_keys, variant_kind

__all__ = ["stage_keys", "stage_inputs", "stage_digest", "datasets_digest", "run_digest", "STAGES"]

STAGES = ("fetch", "pretrained", "tokenize", "train", "measure", "rays", "landscape", "bounds", "cost", "figures",
          "claims", "metrics", "paper")
# wildcards (λ, seed), the set of runs, or another variant's settings: never a train digest key
_RUN_LISTS = ("lambdas", "seeds", "adamw_noise", "adam_l2", "langevin", "sweep")
_VARIANT_KEYS = {"adamw_noise": ["train.adamw_noise.grad_std", "train.adamw_noise.langevin_beta"],
                 "langevin": ["train.langevin.lr", "train.langevin.beta", "train.langevin.table1_std"]}
_OBSERVATION = ("tensorboard",)  # what a job writes beside its outputs; never changes them
_EVAL = ("data.name", "data.seq_len", "model")  # what builds a run's model for its dataset
_MEASUREMENT_SET = ("measure.blocks", "measure.batch_size", "measure.set_seed")


def stage_keys(p: Mapping, stage: str, variant: str = "adamw") -> list[str]:
    """The dotted parameter keys a job of ``stage`` reads itself.

    What reaches a job only through the files it reads — the tokenizer settings through the
    token blocks, the training settings through a checkpoint, the set of runs through the
    list of input files — is not listed: both engines re-run a job when its inputs are
    rebuilt. A training job reads the shared ``train`` keys except those its variant sets
    itself (:func:`~villani.plan.runs.overridden_keys`: a sweep arm's lr or warm-up is in its
    name, the Langevin arm's lr in ``train.langevin``), plus its variant's own settings.
    Each DVC stage's ``params:`` names exactly these keys (tested)."""
    skip = set(overridden_keys(variant)) if stage == "train" else set()
    train = [f"train.{k}" for k in p["train"] if k not in _RUN_LISTS + _OBSERVATION and f"train.{k}" not in skip]
    keys = {
        "fetch": ["data", "model.name", "model.revision", "model.init"],
        "pretrained": ["data.name", "model.name", "model.revision", "model.init"],
        "tokenize": ["data"],
        "train": [*_EVAL, *train] + _VARIANT_KEYS.get(variant_kind(variant), []),
        "measure": [*_EVAL, "train.steps", "train.checkpoints", "train.batch_size", "measure"],
        "rays": [*_EVAL, *_MEASUREMENT_SET, "measure.s_values", "measure.hvp_method", "rays"],
        "landscape": [*_EVAL, *_MEASUREMENT_SET, "landscape"],
        "bounds": ["data.name", "train.lr", "train.langevin.lr", "measure.s_values", "bounds"],
        "cost": ["data.seq_len", "model", "measure.batch_size", "measure.hvp_method",
                 "figures.model_sizes", "figures.cost_repeats"],
        "figures": ["data", "model", "train", "measure", "rays", "landscape", "bounds", "figures"],
        "claims": ["data.name", "train", "measure.s_values", "rays.lambdas", "landscape.lambdas", "bounds",
                   "claims"],
        "metrics": ["data.name", "train.steps", "measure.s_values"],
        "paper": ["data.name", "train", "figures"],  # per dataset; the job's digest covers every dataset
    }
    if stage not in keys:
        raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
    return keys[stage]


def _get(p: Mapping, dotted: str):
    node = p
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def stage_inputs(p: Mapping, stage: str, variant: str = "adamw") -> dict:
    """``{key: value}`` of :func:`stage_keys` (λ, seed and step come from wildcards)."""
    return {k: _get(p, k) for k in stage_keys(p, stage, variant)}


def stage_digest(p: Mapping, stage: str, variant: str = "adamw") -> str:
    """sha256 (16 hex) of :func:`stage_inputs` — a Snakemake rule param."""
    blob = json.dumps(stage_inputs(p, stage, variant), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def datasets_digest(ps: Sequence[Mapping], stage: str) -> str:
    """sha256 (16 hex) of :func:`stage_inputs` of every dataset's parameters, in order —
    the digest of a job that reads several datasets (``paper``)."""
    blob = json.dumps([stage_inputs(p, stage) for p in ps], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_digest(p: Mapping, variant: str, lam: float, seed: int) -> str:
    """Identity of one training run's parameters: ``<train digest>:<λ as in paths>:<seed>``."""
    return f"{stage_digest(p, 'train', variant)}:{format_lam(lam)}:{int(seed)}"
