"""Ctrl-C is one line and exit status 130 with no partial output; an unwritable results/ is
reported before any work."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import tiny_params
from villani.cli import INTERRUPTED
from villani.plan import layout
from villani.plan.config import dump_yaml

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
STEPS = 20_000


def _villani(*args):
    return [sys.executable, "-m", "villani.cli", *map(str, args)]


def _ctrl_c_as_at_a_terminal():
    """SIGINT at its default in the child, as for a command typed at a terminal. A test run
    started in the background of a non-interactive shell (`make test &`, `nohup … &`)
    inherits SIGINT ignored, and Python then keeps ignoring it: Ctrl-C would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow  # 8 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_sigint_mid_training_is_one_line_exit_130_and_leaves_no_partial_file(tmp_path, tiny_data_root):
    # 20,000 steps (≈ 200 s uninterrupted): the signal lands mid-loop even when this process
    # is starved of a core for seconds
    p = tiny_params(train={"steps": STEPS, "segments": 1, "save_every": 7, "checkpoints": {"count": 2}})
    params = tmp_path / "p.yaml"
    dump_yaml(p, params)
    root = tmp_path / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    proc = subprocess.Popen(_villani("train", "--params", params, "--results", root, "--lam", 0.01, "--seed", 0,
                                     "--all", "--device", "cpu"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_ctrl_c_as_at_a_terminal)
    work = layout.fmt(layout.WORK_DIR, root, **RUN) / "state.pt"
    deadline = time.time() + 120
    while not work.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "training ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == INTERRUPTED and "Traceback" not in err, err
    assert not list(root.rglob("*.tmp")), "a temporary file was left behind"
    assert not layout.fmt(layout.SEGMENT, root, step=STEPS, **RUN).exists()


@contextlib.contextmanager
def _read_only_folder(path):
    """``path`` made unwritable: mode 0555, or for root (who ignores modes) a read-only tmpfs."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "none", str(path)], capture_output=True).returncode:
        pytest.skip("running as root without permission to mount a read-only tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


@pytest.mark.parametrize("command", [["tokenize"], ["bounds"], ["train", "--lam", "0.01", "--seed", "0", "--all"]])
@pytest.mark.slow  # 10 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_unwritable_results_is_reported_before_any_work(tmp_path, command):
    params = tmp_path / "p.yaml"
    dump_yaml(tiny_params(), params)
    with _read_only_folder(tmp_path / "ro") as ro:
        t0 = time.perf_counter()
        out = subprocess.run(_villani(*command, "--params", params, "--results", ro / "results"), capture_output=True,
                             text=True, timeout=120)
        took = time.perf_counter() - t0
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith(f"villani: error: {ro}: cannot write results there (") and line.endswith(
        "; nothing was computed"), out.stderr
    assert "tokenized" not in out.stderr and took < 60
