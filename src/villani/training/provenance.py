"""Which parameters a checkpoint was trained under, and the check every stage that
evaluates a trained model makes before using it.

A checkpoint's JSON records ``digest`` (:func:`villani.plan.digest.run_digest`: the
hash of the run's training keys, λ and seed) and ``train_params`` (those keys' values,
:func:`villani.plan.digest.trained_params`). :func:`check_trained_under`
refuses a checkpoint whose digest is not the one the current params give the run — the
weights would be measured as if they came from the params' training — with one line naming
the keys that differ, as ``villani train`` refuses to continue from such a state.
"""

from __future__ import annotations

import json
from typing import Mapping

from villani.plan.digest import params_difference, run_digest, trained_params
from villani.plan.runs import Run
from villani.plan.writers import command

__all__ = ["trained_params", "check_trained_under"]


def _show(v) -> str:
    t = json.dumps(v, default=str)
    return t if len(t) <= 40 else t[:30] + "…"


def check_trained_under(params: Mapping, run: Run, meta: Mapping, meta_path) -> None:
    """One-line ValueError unless the checkpoint (``meta`` read from ``meta_path``) was
    trained under ``params`` for ``run``."""
    want = run_digest(params, run.variant, run.lam, run.seed)
    got = meta.get("digest")
    if got == want:
        return
    if got is None:
        raise ValueError(f"{meta_path}: records no training digest, so the parameters it was trained under are "
                         f"unknown; {_retrain(meta_path)}")
    recorded = meta.get("train_params")
    if not isinstance(recorded, Mapping):
        raise ValueError(f"{meta_path}: trained under other parameters (digest {got} ≠ {want}; the checkpoint does "
                         f"not record which keys differ): {_retrain(meta_path)}, or use the params it was trained with")
    shown = params_difference(recorded, trained_params(params, run.variant))
    if not shown:
        raise ValueError(f"{meta_path}: trained under other parameters ({_run_difference(meta, run, got, want)}): "
                         f"{_retrain(meta_path)}, or use the params it was trained with")
    raise ValueError(f"{meta_path}: trained under other parameters ({shown}): {_retrain(meta_path)}, or use the "
                     "params it was trained with")


def _retrain(meta_path) -> str:
    """Retrain the run of checkpoint.json ``meta_path``: its every segment not done under the
    parameters asked now (`--all`), or the workflow."""
    cmd = command(meta_path)
    return f"retrain the run (`{cmd}`, or the workflow)" if cmd else "retrain the run (the workflow)"


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
