"""The one tiny run the hardening tests damage: trained (every segment) into a fresh results
folder that holds a copy of the tiny tokenized data, with its parameter file written beside it."""

from __future__ import annotations

import shutil
from pathlib import Path

from villani.plan.config import dump_yaml
from villani.plan.schedule import segment_ends
from villani.training import train_segment

LAM, SEED = 0.01, 0


def train_tiny_run(p: dict, base: Path, tiny_data_root: Path) -> tuple[Path, Path]:
    """(parameter file, results root) of ``p``'s AdamW run at λ = 0.01, seed 0, under ``base``."""
    root = base / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=root, device="cpu", progress=False, variant="adamw", lam=LAM, seed=SEED)
    params = base / "p.yaml"
    dump_yaml(p, params)
    return params, root
