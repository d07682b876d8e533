"""Checkpoint steps and training segments, computed from params so the DAG is static.

Step 0 (the initialisation) is always a checkpoint. The ``count`` checkpoints after it are
spaced linearly, ``round(k·T/count)`` for k = 1..count, or logarithmically between 1 and
T (duplicates after rounding are dropped). Explicit ``steps`` override both.

Training runs in ``segments`` jobs. The K checkpoints after step 0 are cut into that many
contiguous groups of sizes as equal as possible (earlier groups one larger); a segment
ends at the last checkpoint of its group and writes every checkpoint of the group (the
first segment also writes step 0).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from villani.plan.runs import is_sweep_arm


def checkpoint_steps(train: Mapping) -> list[int]:
    """Sorted checkpoint steps including 0 and ``train['steps']``."""
    total = train["steps"]
    ck = train["checkpoints"]
    if ck["steps"]:
        steps = set(ck["steps"])
    elif ck["spacing"] == "log":
        steps = {int(round(x)) for x in np.geomspace(1, total, ck["count"])}
    else:
        count = ck["count"]
        steps = {round(k * total / count) for k in range(1, count + 1)}
    steps.add(total)
    return [0] + sorted(s for s in steps if s > 0)


def segment_ends(train: Mapping) -> list[int]:
    """The step at which each training segment ends, ascending; the last is ``train['steps']``."""
    after0 = checkpoint_steps(train)[1:]
    n = min(train["segments"], len(after0))
    sizes = [len(after0) // n + (1 if i < len(after0) % n else 0) for i in range(n)]
    ends, i = [], 0
    for size in sizes:
        i += size
        ends.append(after0[i - 1])
    return ends


def segment_start(train: Mapping, end: int) -> int:
    """The step a segment ending at ``end`` starts from (0 for the first)."""
    ends = segment_ends(train)
    if end not in ends:
        raise ValueError(f"step {end} is not a segment end (segment ends: {ends})")
    k = ends.index(end)
    return 0 if k == 0 else ends[k - 1]


def segment_for(train: Mapping, step: int) -> int:
    """The end step of the segment that writes checkpoint ``step``."""
    if step not in checkpoint_steps(train):
        raise ValueError(f"step {step} is not a checkpoint step ({checkpoint_steps(train)})")
    return next(e for e in segment_ends(train) if e >= step)


def checkpoints_in_segment(train: Mapping, end: int) -> list[int]:
    """Checkpoint steps written by the segment ending at ``end`` (step 0 belongs to the first)."""
    start = segment_start(train, end)
    return [s for s in checkpoint_steps(train) if (start < s <= end) or (s == 0 and start == 0)]


def measured_steps(params: Mapping, variant: str) -> list[int]:
    """The checkpoints a run of ``variant`` is measured at: every checkpoint, or — for an lr /
    warm-up sweep arm (``adamw_lr…``, ``adamw_wu…``) with ``measure.sweep_arms: ends`` — the
    first and the last."""
    steps = checkpoint_steps(params["train"])
    if params["measure"]["sweep_arms"] == "ends" and is_sweep_arm(variant):
        return [steps[0], steps[-1]]
    return steps


def job_steps(rule: str, train: Mapping) -> list[int]:
    """The steps that name a ``train`` job's outputs (segment ends) or a ``measure`` job's
    (checkpoints): what a job per run (``jobs.<rule>: run``) covers."""
    return segment_ends(train) if rule == "train" else checkpoint_steps(train)


def spectrum_at(every: int, step: int, steps: list[int]) -> bool:
    """Whether checkpoint ``step`` of ``steps`` gets the top-k run and the density: every
    ``every``-th checkpoint counted from the first, and the last."""
    if every < 1:
        raise ValueError(f"measure.spectrum_every: {every!r} is invalid (expected an integer ≥ 1)")
    i = steps.index(step)
    return i % every == 0 or i == len(steps) - 1
