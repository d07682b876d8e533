"""`villani train --seed 0 1 --per-device 2`: the runs of two seeds side by side, one process
each (villani.training.side_by_side) — bit-identical to each run trained alone, through a
SIGTERM that stops both (their work states written, exit 75, one line) and the rerun that
resumes them; bad input in one line. About 40 s (four process start-ups of ≈ 6.5 s)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.runtime.stop import EXIT_STOPPED
from villani.training import train_segment

RUN = dict(dataset="tiny", variant="adamw", lam=0.01)
TRAIN = {"seeds": [0, 1], "steps": 150, "segments": 1, "save_every": 10_000, "checkpoints": {"count": 2}}


def _cli(params, root, *seed_args) -> list[str]:
    return [sys.executable, "-m", "villani.cli", "train", "--params", str(params), "--results", str(root),
            "--lam", "0.01", "--device", "cpu", "--threads", "2", "--all", *seed_args]


def _rows(csv) -> int:
    try:
        return max(len(csv.read_text().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


@pytest.mark.slow  # 34 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_two_seeds_side_by_side_stop_and_resume_equal_each_alone(tmp_path, tiny_data_root):
    p = tiny_params(train=TRAIN)
    params = tmp_path / "p.yaml"
    dump_yaml(p, params)
    alone = tmp_path / "alone"
    shutil.copytree(tiny_data_root / "data", alone / "data")
    for seed in (0, 1):
        train_segment(p, variant="adamw", lam=0.01, seed=seed, end=150, root=alone, device="cpu", progress=False)
    root = tmp_path / "side"
    shutil.copytree(tiny_data_root / "data", root / "data")
    partials = [layout.fmt(layout.SEGMENT_LOG_PARTIAL, root, seed=s, step=150, **RUN) for s in (0, 1)]
    proc = subprocess.Popen(_cli(params, root, "--seed", "0", "1", "--per-device", "2"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while min(map(_rows, partials)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "training ended before it could be signalled; make TRAIN longer"
    proc.send_signal(signal.SIGTERM)  # to the parent alone: it passes the stop on
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == EXIT_STOPPED, err
    last = [ln for ln in err.splitlines() if ln.startswith("villani:")][-1]
    assert last.startswith("villani: stopped by SIGTERM; train adamw λ=0.01 seeds 0 1: seed(s) 0 1 stopped"), err
    assert "Traceback" not in err
    for s in (0, 1):
        assert (layout.fmt(layout.WORK_DIR, root, seed=s, **RUN) / "state.pt").exists()

    rerun = subprocess.run(_cli(params, root, "--seed", "0", "1", "--per-device", "2"), capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    for s in (0, 1):
        weights = [sha256_file(layout.fmt(layout.CKPT_WEIGHTS, r, seed=s, step=150, **RUN)) for r in (alone, root)]
        assert weights[0] == weights[1], s
        assert _rows(layout.fmt(layout.SEGMENT_LOG, root, seed=s, step=150, **RUN)) == 150


@pytest.mark.parametrize("seed_args, env, message", [
    (["--seed", "0", "0"], {}, r"^villani: error: --seed: \[0, 0\] names a seed twice \(one process per run\)$"),
    (["--seed", "0", "7"], {}, r"^villani: error: --seed: 7 is not in train.seeds = \[0, 1\]$"),
    (["--seed", "0", "1"], {"VILLANI_MPS": "1"},
     r"^villani: error: VILLANI_MPS=1: MPS shares a CUDA device, and this command trains on cpu; unset VILLANI_MPS$"),
])
@pytest.mark.slow  # 10 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_bad_side_by_side_input_is_one_line(tmp_path, tiny_data_root, seed_args, env, message):
    import os
    import re

    params = tmp_path / "p.yaml"
    dump_yaml(tiny_params(train=TRAIN), params)
    res = subprocess.run(_cli(params, tmp_path / "r", *seed_args), capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env})
    assert res.returncode == 2 and re.match(message, res.stderr.strip()), res.stderr
