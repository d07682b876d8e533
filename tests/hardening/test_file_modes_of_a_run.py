"""Every file a run writes gets the umask's mode (issue 40 item 6, issue 39): a checkpoint's
weights too — safetensors' own `save_file` swaps in a 0600 file; ours goes through the
atomic writer. `villani train` and `villani measure` run as a user runs them, under umask
022 (0644: the group reads the checkpoints) and 027 (0640: the mode follows the umask)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.runs import Run

RUN = Run("tiny", "adamw", 0.01, 0)
VILLANI = str(Path(sys.executable).parent / "villani")


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask022", "umask027"])
@pytest.mark.slow  # 25 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_trained_and_measured_run_has_the_umask_mode(tmp_path, tiny_data_root, mask):
    root = tmp_path / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    params = tmp_path / "p.yaml"
    dump_yaml(tiny_params(), params)
    run = [VILLANI, "--params", str(params), "--results", str(root), "--device", "cpu", "--log-level", "WARNING"]
    for argv in (["train", "--lam", "0.01", "--seed", "0", "--all"], ["measure", "--lam", "0.01", "--seed", "0",
                                                                       "--step", "24"]):
        done = subprocess.run(run[:1] + argv + run[1:], capture_output=True, text=True, timeout=600,
                              preexec_fn=lambda: os.umask(mask), env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert done.returncode == 0, done.stderr[-2000:]
    folder = RUN.path(layout.RUN_DIR, root)
    files = [f for f in folder.rglob("*") if f.is_file()]
    names = {f.name for f in files}
    assert {"model.safetensors", "config.json", "state.pt", "tokenizer.json", "checkpoint.json", "README.md",
            "seg0000024.json", "seg0000024.csv", "step0000024.json", "step0000024.parquet", "train.lock"} <= names
    modes = {str(f.relative_to(folder)): oct(stat.S_IMODE(f.stat().st_mode)) for f in files}
    assert modes == dict.fromkeys(modes, oct(0o666 & ~mask)), modes
