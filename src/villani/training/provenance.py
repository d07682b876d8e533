"""Which parameters a checkpoint was trained under, and the check every stage that
evaluates a trained model makes before using it.

A checkpoint's JSON records ``digest`` (:func:`villani.plan.digest.run_digest`: the
hash of the run's training keys, λ and seed) and ``train_params`` (those keys' values,
:func:`villani.plan.digest.stage_inputs` of stage ``train``). :func:`check_trained_under`
refuses a checkpoint whose digest is not the one the current params give the run — the
weights would be measured as if they came from the params' training — with one line naming
the keys that differ, as ``villani train`` refuses to continue from such a state.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from villani.plan.digest import run_digest, stage_inputs
from villani.plan.runs import Run

__all__ = ["trained_params", "check_trained_under", "differing_keys"]


def trained_params(params: Mapping, variant: str) -> dict:
    """The training keys' values as a checkpoint records them (JSON types)."""
    return json.loads(json.dumps(stage_inputs(params, "train", variant), default=str))


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


def _show(v: Any) -> str:
    t = json.dumps(v, default=str)
    return t if len(t) <= 40 else t[:30] + "…"


_ABSENT = object()


def _get(d: Mapping, dotted: str, top: list[str]) -> Any:
    """The value of a dotted key of :func:`differing_keys` in a stage_inputs dict, whose own
    keys are dotted too (``train.lr``, ``model``); ``_ABSENT`` where the dict lacks it."""
    head = next((k for k in top if dotted == k or dotted.startswith(k + ".")), None)
    node: Any = d.get(head, _ABSENT) if head else _ABSENT
    for part in dotted[len(head) + 1:].split(".") if head and dotted != head else []:
        node = node.get(part, _ABSENT) if isinstance(node, Mapping) else _ABSENT
    return node


def _show_value(v: Any) -> str:
    """A recorded or current value; a key one side lacks reads ``(not set)`` — e.g. a key
    added to the parameters after the checkpoint was written."""
    return "(not set)" if v is _ABSENT else _show(v)


def check_trained_under(params: Mapping, run: Run, meta: Mapping, meta_path) -> None:
    """One-line ValueError unless the checkpoint (``meta`` read from ``meta_path``) was
    trained under ``params`` for ``run``."""
    want = run_digest(params, run.variant, run.lam, run.seed)
    got = meta.get("digest")
    if got == want:
        return
    if got is None:
        raise ValueError(f"{meta_path}: records no training digest, so the parameters it was trained under are "
                         "unknown (retrain the run with this villani)")
    current = trained_params(params, run.variant)
    recorded = meta.get("train_params")
    if not isinstance(recorded, Mapping):
        raise ValueError(f"{meta_path}: trained under other parameters (digest {got} ≠ {want}; the checkpoint does "
                         "not record which keys differ): retrain the run, or use the params it was trained with")
    keys = differing_keys(recorded, current)
    if not keys:
        raise ValueError(f"{meta_path}: trained under other parameters ({_run_difference(meta, run, got, want)}): "
                         "retrain the run (villani train / make run), or use the params it was trained with")
    top = list(current) + [k for k in recorded if k not in current]
    shown = "; ".join(f"{k}: {_show_value(_get(recorded, k, top))} there, {_show_value(_get(current, k, top))} here"
                      for k in keys[:4]) + (f"; and {len(keys) - 4} more" if len(keys) > 4 else "")
    raise ValueError(f"{meta_path}: trained under other parameters ({shown}): retrain the run "
                     "(villani train / make run), or use the params it was trained with")


def _run_difference(meta: Mapping, run: Run, got: str, want: str) -> str:
    """What differs when the training keys agree: the run's variant, λ or seed — or, if
    those agree too, only the digest (written by a villani whose run digest differs)."""
    there = {"variant": meta.get("variant"), "λ": None if meta.get("lam") is None else float(meta["lam"]),
             "seed": meta.get("seed")}
    here = {"variant": run.variant, "λ": float(run.lam), "seed": run.seed}
    diff = [f"{k}: {_show(there[k])} there, {_show(here[k])} here" for k in here
            if there[k] is not None and there[k] != here[k]]
    return "; ".join(diff) or (f"the same training keys, variant, λ and seed, but digest {got} there, {want} here: "
                               "written by a villani version that hashed the run differently")
