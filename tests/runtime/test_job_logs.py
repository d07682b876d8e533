"""A running job's log shows its progress: `villani train` and `villani measure` started as a
workflow job starts them (stdout and stderr to a file), read while they still run."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from villani.plan.config import dump_yaml
from villani.training import train_segment

TRAIN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO villani\.training\.loop: train tiny adamw λ=0\.01 seed=0 "
                        r"seg 24→4024 \| step (\d+)/4024 \(\d+%\) \| [0-9.e-]+ s/step \| loss=\S+ lr=\S+ tokens/s=\S+ "
                        r"‖θ‖²=\S+ \| elapsed \S+ \| ETA \d+:\d\d:\d\d$")
MEASURE_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO villani\.measure\.measure_stage: measure tiny adamw λ=0\.01 "
                          r"seed=0 step=24 \| hutchinson \| HVP (\d+)/\d+ \(\d+%\) \| [0-9.e-]+ s/HVP \| "
                          r"probes=\d+/4000 trace=\S+ ci95=\[\S+, \S+\] \| elapsed \S+ \| ETA \d+:\d\d:\d\d$")


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:  # like Snakemake's `> {log} 2>&1`: not a terminal, no bar
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)


def _progress_while_running(proc: subprocess.Popen, log: Path, pattern: re.Pattern, timeout: float = 240) -> list[int]:
    """Poll ``log`` until two progress lines with increasing counts appear while ``proc`` runs."""
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            counts = [int(m.group(1)) for m in map(pattern.match, log.read_text(errors="replace").splitlines()) if m]
            if len(counts) >= 2 and counts[-1] > counts[0]:
                assert proc.poll() is None, "the job ended before its log was read; make it longer"
                return counts
            assert proc.poll() is None, f"job ended (rc {proc.returncode}):\n{log.read_text()}"
            time.sleep(0.2)
        raise AssertionError(f"no progress lines within {timeout} s:\n{log.read_text()}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow  # 8 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_running_train_and_measure_jobs_log_progress(tmp_path, tiny_data_root):
    """A training segment of 4,000 steps and a measurement with 4,000 probes, each with a
    0.5 s progress interval: both logs show timestamped progress lines (step/total, loss, lr,
    tokens/s, ‖θ‖², ETA; phase, HVPs, s/HVP, running trace and CI, ETA) before the jobs end."""
    root = tmp_path / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    p = tiny_params(train={"steps": 4024, "checkpoints": {"steps": [24, 4024]}, "segments": 2},
                    measure={"num_probes": 4000})
    train_segment(p, variant="adamw", lam=0.01, seed=0, end=24, root=root, device="cpu", progress=False)
    params = tmp_path / "p.yaml"
    dump_yaml(p, params)
    common = ["--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0", "--device", "cpu",
              "--progress-interval", "0.5"]
    train = _start([sys.executable, "-m", "villani.cli", "train", *common, "--until", "4024"], tmp_path / "train.log")
    measure = _start([sys.executable, "-m", "villani.cli", "measure", *common, "--step", "24"], tmp_path / "measure.log")
    assert _progress_while_running(train, tmp_path / "train.log", TRAIN_LINE)[-1] > 24
    assert _progress_while_running(measure, tmp_path / "measure.log", MEASURE_LINE)[-1] > 1
