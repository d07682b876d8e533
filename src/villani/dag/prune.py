"""Free disk after measurement: delete checkpoint files no later stage needs.

A checkpoint's weights are needed until its ``measure.json`` exists. Kept always:
segment ends (the next segment and any rerun resume there), the checkpoints the rays and
landscape stages read, and every checkpoint JSON (step, loss, ‖θ‖², sha256 — the figures
read these). A checkpoint no stage measures (a sweep arm's inner checkpoints with
``measure.sweep_arms: ends``) is prunable at once.
Checkpoint files are not declared Snakemake outputs, so pruning never triggers reruns;
under DVC the run's ``ckpt`` output changes, so prune there only what you will not
``dvc push``. At GPT-Neo-125M scale a checkpoint's weights are 0.5 GB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from villani.plan import layout
from villani.plan.runs import landscape_centres, rays_center, runs
from villani.plan.schedule import checkpoint_steps, measured_steps, segment_ends


def protected(params: Mapping) -> set[tuple[str, float, int, int]]:
    """(variant, λ, seed, step) whose files must stay."""
    t = params["train"]
    keep = {(r.variant, r.lam, r.seed, e) for r in runs(params) for e in segment_ends(t)}
    centres = [rays_center(params)] if params["rays"]["through_checkpoint"] else []
    centres += [(c.run, c.step) for lam in params["landscape"]["lambdas"] for c in landscape_centres(params, lam)]
    keep |= {(run.variant, run.lam, run.seed, step) for run, step in centres}
    return keep


def prunable(params: Mapping, root=layout.RESULTS) -> list[Path]:
    """Weight and state files of measured checkpoints that nothing else needs."""
    keep = protected(params)
    out = []
    for r in runs(params):
        measured = measured_steps(params, r.variant)
        for step in checkpoint_steps(params["train"]):
            if (r.variant, r.lam, r.seed, step) in keep:
                continue
            if step in measured and not r.path(layout.MEASURE_JSON, root, step=step).exists():
                continue  # not measured yet (a checkpoint no run measures — measure.sweep_arms: ends — goes)
            out += [p for p in (r.path(layout.CKPT_WEIGHTS, root, step=step),
                                r.path(layout.CKPT_STATE, root, step=step)) if p.exists()]
    return out


def prune(params: Mapping, root=layout.RESULTS, *, dry_run: bool = False) -> tuple[list[Path], int]:
    """Delete (or with ``dry_run`` only list) :func:`prunable` files; return them and the bytes freed."""
    files = prunable(params, root)
    freed = sum(p.stat().st_size for p in files)
    if not dry_run:
        for p in files:
            p.unlink()
    return files, freed
