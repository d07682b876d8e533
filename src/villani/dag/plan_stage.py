"""The ``plan`` stage: what the parameters define for a dataset, and a results tree that
holds exactly that.

``results/plan/{dataset}.json`` lists the dataset's runs (variant, λ, seed) and landscape
λ. It changes exactly when that set changes, and every summary stage reads it, so both
engines rerun the summaries then. Runs and surfaces that left the set are moved, whole, to
``results/retired/{dataset}/`` (and back when they return): the folders DVC hashes as the
summaries' dependencies — ``results/runs/{dataset}``, ``results/landscape/{dataset}`` —
hold the current ones alone, so a dropped λ enters no hash and a clone that pulled the
results has the same folders as the one that pushed them. Nothing is deleted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from villani.io import records
from villani.plan import layout
from villani.plan.runs import runs

__all__ = ["plan_record", "write_plan"]


def plan_record(params: Mapping) -> dict:
    """The runs and landscape λ of ``params``' dataset, as written to its plan file."""
    return {"dataset": params["data"]["name"],
            "runs": [{"variant": r.variant, "lam": layout.format_lam(r.lam), "seed": r.seed} for r in runs(params)],
            "landscape": [layout.format_lam(x) for x in params["landscape"]["lambdas"]]}


def _current(params: Mapping, root) -> dict[Path, Path]:
    """{folder of a current run or surface: where it goes when retired}, relative to the dataset."""
    ds = params["data"]["name"]
    retired = layout.fmt(layout.RETIRED_DIR, root, dataset=ds)
    out = {r.path(layout.RUN_DIR, root): retired / "runs" / r.variant / f"lam{layout.format_lam(r.lam)}" /
           f"seed{r.seed}" for r in runs(params)}
    for lam in params["landscape"]["lambdas"]:
        out[layout.fmt(layout.LANDSCAPE_DIR, root, dataset=ds, lam=lam)] = (
            retired / "landscape" / f"lam{layout.format_lam(lam)}")
    return out


def _found(params: Mapping, root) -> dict[Path, Path]:
    """The same map for every run and surface folder on disk."""
    ds = params["data"]["name"]
    retired = layout.fmt(layout.RETIRED_DIR, root, dataset=ds)
    runs_dir, surfaces = (layout.fmt(p, root, dataset=ds) for p in (layout.RUNS_DIR, layout.LANDSCAPES_DIR))
    out = {d: retired / "runs" / d.relative_to(runs_dir) for d in runs_dir.glob("*/lam*/seed*") if d.is_dir()}
    out |= {d: retired / "landscape" / d.name for d in surfaces.glob("lam*") if d.is_dir()}
    return out


def _move(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` (a free ``dst.N`` when ``dst`` exists); a folder another
    process moved first is left alone."""
    target, n = dst, 1
    while target.exists():
        target, n = dst.with_name(f"{dst.name}.{n}"), n + 1
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(src, target)
    except FileNotFoundError:
        pass


def write_plan(params: Mapping, root=layout.RESULTS) -> tuple[Path, list[Path], list[Path]]:
    """Retire the folders of runs and surfaces outside ``params``, restore those back in
    it, write the plan file; return (plan file, retired, restored)."""
    current, found = _current(params, root), _found(params, root)
    retired = [d for d in found if d not in current]
    for d in retired:
        _move(d, found[d])
    restored = [d for d, away in current.items() if not d.exists() and away.is_dir()]
    for d in restored:
        _move(current[d], d)
    path = layout.fmt(layout.PLAN, root, dataset=params["data"]["name"])
    records.write_record(path, plan_record(params), "plan")
    return path, retired, restored
