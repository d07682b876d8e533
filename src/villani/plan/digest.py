"""The params digest of a job: a hash of exactly the parameters the job reads.

A job's digest changes exactly when one of the keys it reads changes, so Snakemake's
``params`` rerun trigger re-runs only the jobs whose inputs changed (editing one λ re-runs
that λ's branch: λ, seed and step are wildcards, never part of a digest). Training
segments also store :func:`run_digest` in their checkpoints and work state and refuse to
continue from a state written under other parameters. Both the keys
and ``dvc.yaml``'s ``params:`` come from one stage table (:mod:`villani.plan.stages`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

from villani.plan import stages
from villani.plan.layout import format_lam
from villani.plan.runs import overridden_keys, variant_kind
from villani.plan.stages import STAGES

__all__ = ["stage_keys", "stage_inputs", "stage_digest", "datasets_digest", "run_digest", "trained_params",
           "differing_keys", "params_difference", "STAGES"]

# wildcards (λ, seed), the set of runs, or another variant's settings: never a train digest key
_RUN_LISTS = ("lambdas", "seeds", "adamw_noise", "adam_l2", "langevin", "sweep")
_VARIANT_KEYS = {"adamw_noise": ["train.adamw_noise.grad_std", "train.adamw_noise.langevin_beta"],
                 "langevin": ["train.langevin.lr", "train.langevin.beta", "train.langevin.table1_std"]}
_OBSERVATION = ("tensorboard",)  # what a job writes beside its outputs; never changes them
_EXECUTION = ("compile", "threads")  # how a step runs: the same update within rounding, recorded in each checkpoint


def stage_keys(p: Mapping, stage: str, variant: str = "adamw") -> list[str]:
    """The dotted parameter keys a job of ``stage`` reads itself: the stage's ``reads`` in
    :data:`villani.plan.stages.TABLE`, expanded for the job's variant.

    What reaches a job only through the files it reads — the tokenizer settings through the
    token blocks, the training settings through a checkpoint, the set of runs through the
    list of input files — is not listed: both engines re-run a job when its inputs are
    rebuilt. A training job reads the shared ``train`` keys except those its variant sets
    itself (:func:`~villani.plan.runs.overridden_keys`: a sweep arm's lr or warm-up is in its
    name, the Langevin arm's lr in ``train.langevin``), plus its variant's own settings.
    Each DVC stage's ``params:`` names exactly these keys (generated from the same table)."""
    keys: list[str] = []
    for key in stages.stage(stage).reads:
        if key == stages.TRAIN_KEYS:
            skip = set(overridden_keys(variant))
            keys += [f"train.{k}" for k in p["train"]
                     if k not in _RUN_LISTS + _OBSERVATION + _EXECUTION and f"train.{k}" not in skip]
        elif key == stages.VARIANT_KEYS:
            keys += _VARIANT_KEYS.get(variant_kind(variant), [])
        elif key == stages.LANDSCAPE_KEYS:
            keys += [f"landscape.{k}" for k in p["landscape"] if k != "lambdas"]
        else:
            keys.append(key)
    return keys


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


def trained_params(p: Mapping, variant: str) -> dict:
    """The training keys' values as a checkpoint, a segment manifest and a measure JSON
    record them (:func:`stage_inputs` of stage ``train``, as JSON types)."""
    return json.loads(json.dumps(stage_inputs(p, "train", variant), default=str))


def differing_keys(recorded: Mapping, current: Mapping, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts (a key only one has counts)."""
    out = []
    for key in sorted(set(recorded) | set(current), key=str):
        a, b, name = recorded.get(key), current.get(key), f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += differing_keys(a, b, name + ".")
        elif a != b or (key in recorded) != (key in current):
            out.append(name)
    return out


_ABSENT = object()


def _show(v) -> str:
    """A recorded or current value; a key one side lacks reads ``(not set)`` — e.g. a key
    added to the parameters after the record was written."""
    if v is _ABSENT:
        return "(not set)"
    t = json.dumps(v, default=str)
    return t if len(t) <= 40 else t[:30] + "…"


def _recorded_value(d: Mapping, dotted: str, top: list[str]):
    """The value of a dotted key of :func:`differing_keys` in a stage_inputs dict, whose own
    keys are dotted too (``train.lr``, ``model``); ``_ABSENT`` where the dict lacks it."""
    head = next((k for k in top if dotted == k or dotted.startswith(k + ".")), None)
    node = d.get(head, _ABSENT) if head else _ABSENT
    for part in dotted[len(head) + 1:].split(".") if head and dotted != head else []:
        node = node.get(part, _ABSENT) if isinstance(node, Mapping) else _ABSENT
    return node


def params_difference(recorded: Mapping, current: Mapping, most: int = 4) -> str:
    """``train.lr: 0.003 there, 0.004 here; …`` for the keys whose values differ between two
    :func:`stage_inputs` dicts (recorded, current); empty when none differs."""
    keys = differing_keys(recorded, current)
    top = list(current) + [k for k in recorded if k not in current]
    shown = "; ".join(f"{k}: {_show(_recorded_value(recorded, k, top))} there, {_show(_recorded_value(current, k, top))} here"
                      for k in keys[:most])
    return shown + (f"; and {len(keys) - most} more" if len(keys) > most else "")
