"""SIGTERM / SIGUSR1 (a SLURM time limit, preemption, scancel) stop `villani train` at the
next step boundary with its work state written at that step: one line, exit status 75,
and the rerun resumes there, recomputes no step and ends bit-identical (villani.runtime.stop)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.runtime.stop import EXIT_STOPPED
from villani.training import train_segment

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
# one segment; save_every beyond its end: the only work state is the one the stop writes
TRAIN = {"steps": 150, "segments": 1, "save_every": 10_000, "checkpoints": {"count": 2}}


def _cli(params: Path, root: Path) -> list[str]:
    return [sys.executable, "-m", "villani.cli", "train", "--params", str(params), "--results", str(root),
            "--lam", "0.01", "--seed", "0", "--device", "cpu", "--threads", "1", "--all"]


def _rows(csv: Path) -> int:
    try:
        return max(len(csv.read_text().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_data_root):
    tmp = tmp_path_factory.mktemp("stop")
    p = tiny_params(train=TRAIN)
    dump_yaml(p, tmp / "p.yaml")
    ref = tmp / "ref"
    shutil.copytree(tiny_data_root / "data", ref / "data")
    torch.set_num_threads(1)
    train_segment(p, end=TRAIN["steps"], root=ref, device="cpu", progress=False, **{k: RUN[k] for k in
                                                                                 ("variant", "lam", "seed")})
    return tmp / "p.yaml", sha256_file(layout.fmt(layout.CKPT_WEIGHTS, ref, step=TRAIN["steps"], **RUN))


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM])
@pytest.mark.slow  # 28 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_stop_signal_saves_at_the_step_reached_and_resumes_bit_identical(sig, reference, tmp_path, tiny_data_root):
    params, ref_sha = reference
    root = tmp_path / "r"
    shutil.copytree(tiny_data_root / "data", root / "data")
    partial = layout.fmt(layout.SEGMENT_LOG_PARTIAL, root, step=TRAIN["steps"], **RUN)
    proc = subprocess.Popen(_cli(params, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _rows(partial) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "training ended before it could be signalled; make TRAIN longer"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_STOPPED, err
    lines = [ln for ln in err.splitlines() if ln.startswith("villani:")]
    assert len(lines) == 1 and lines[0].startswith(f"villani: stopped by {sig.name}; "), err
    assert "Traceback" not in err

    state = torch.load(layout.fmt(layout.WORK_DIR, root, **RUN) / "state.pt", weights_only=True)
    stopped_at = int(state["step"])
    assert 3 <= stopped_at < TRAIN["steps"] and f"work state saved at step {stopped_at} " in lines[0]
    # every step the stopped process logged is in the state: nothing to recompute
    assert _rows(partial) == stopped_at == state["log_rows"]

    rerun = subprocess.run(_cli(params, root), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    manifest = json.loads(layout.fmt(layout.SEGMENT, root, step=TRAIN["steps"], **RUN).read_text())
    assert manifest["resumed_from_work_step"] == stopped_at
    assert sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=TRAIN["steps"], **RUN)) == ref_sha
    log_csv = layout.fmt(layout.SEGMENT_LOG, root, step=TRAIN["steps"], **RUN)
    assert _rows(log_csv) == TRAIN["steps"]


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_stop_signal_ends_a_measurement_without_partial_output(reference, tmp_path):
    """Any other command (here `villani measure`) stops at once: one line, exit status 75,
    no measurement file and no temporary left."""
    params, _ = reference
    root = params.parent / "ref"
    cmd = [sys.executable, "-m", "villani.cli", "measure", "--params", str(params), "--results", str(root),
           "--dataset", "tiny", "--variant", "adamw", "--lam", "0.01", "--seed", "0", "--step", str(TRAIN["steps"]),
           "--device", "cpu", "--threads", "1"]
    env = {**os.environ, "VILLANI_PROGRESS_INTERVAL": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = [proc.stderr.readline()]  # signal once it logs (it has started measuring)
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=60)
    err = "".join(seen) + rest
    assert proc.returncode == EXIT_STOPPED, err
    assert [ln for ln in err.splitlines() if ln.startswith("villani:")] == [
        "villani: stopped by SIGTERM; no partial output was written (earlier results are intact)"], err
    out = layout.fmt(layout.MEASURE_JSON, root, step=TRAIN["steps"], **RUN)
    assert not out.exists() and not layout.fmt(layout.MEASURE_PARQUET, root, step=TRAIN["steps"], **RUN).exists()
    assert not list(out.parent.glob(".*.tmp"))
