"""The per-step CSV grows while a segment trains, survives SIGKILL (no duplicated or missing
step, the same values as an uninterrupted run), and the optional TensorBoard events read back."""

from __future__ import annotations

import csv
import importlib.util
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
from villani.training import loop as loop_mod
from villani.training import train_segment
from villani.training.step_log import LOG_FIELDS

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
TIMINGS = ("tokens_per_s", "wall_clock_s")  # measured seconds: the only columns that may differ between runs


def _root(tmp_path: Path, tiny_data_root: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    return root


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _deterministic_text(path: Path) -> list[str]:
    """Each line of the CSV with the timing columns blanked: the exact bytes of every other field."""
    out = []
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            out.append(",".join("" if LOG_FIELDS[i] in TIMINGS and rec[0] != "step" else v for i, v in enumerate(rec)))
    return out


def _count_rows(path: Path) -> int:
    try:
        return max(path.read_bytes().count(b"\n") - 1, 0)
    except FileNotFoundError:
        return 0


@pytest.mark.slow  # 10 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_csv_grows_and_sigkill_rerun_equals_uninterrupted(tmp_path, tiny_data_root):
    """Kill `villani train` when the growing CSV holds rows *beyond* the last work state
    (steps 13–17 after the state at 10 or 20…), rerun: the work state's step-k rows are kept,
    the rest is truncated and trained again; the final weights are bit-identical, the final
    CSV has every step once, and every field but the two timing columns is byte-identical
    to an uninterrupted run's."""
    steps, every = 40, 10
    p = tiny_params(train={"steps": steps, "segments": 1, "save_every": every, "checkpoints": {"count": 1}})
    ref = _root(tmp_path / "ref", tiny_data_root)
    train_segment(p, end=steps, root=ref, device="cpu", progress=False, **{k: RUN[k] for k in ("variant", "lam", "seed")})
    params = tmp_path / "p.yaml"
    dump_yaml(p, params)
    root = _root(tmp_path / "killed", tiny_data_root)
    cmd = [sys.executable, "-m", "villani.cli", "train", "--params", str(params), "--results", str(root),
           "--lam", "0.01", "--seed", "0", "--until", str(steps), "--device", "cpu"]
    partial = layout.fmt(layout.SEGMENT_LOG_PARTIAL, root, step=steps, **RUN)
    work = layout.fmt(layout.WORK_DIR, root, **RUN) / "state.pt"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while proc.poll() is None and time.time() < deadline:
        n = _count_rows(partial)
        if n > every and n % every >= 3:  # a work state exists and rows past it are on disk
            break
        time.sleep(0.005)
    assert proc.poll() is None, "training finished before it could be killed; make the run longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = torch.load(work, weights_only=True)
    rows_at_kill = _count_rows(partial)
    assert state["log_rows"] == state["step"] < rows_at_kill < steps
    assert partial.stat().st_size > state["log_bytes"]
    final = layout.fmt(layout.SEGMENT_LOG, root, step=steps, **RUN)
    assert not final.exists()  # the declared output appears only when the segment is complete
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert not partial.exists() and not work.exists()
    assert (sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=steps, **RUN))
            == sha256_file(layout.fmt(layout.CKPT_WEIGHTS, ref, step=steps, **RUN)))
    ref_csv = layout.fmt(layout.SEGMENT_LOG, ref, step=steps, **RUN)
    assert [int(r["step"]) for r in _rows(final)] == list(range(1, steps + 1))
    assert _deterministic_text(final) == _deterministic_text(ref_csv)
    wall = [float(r["wall_clock_s"]) for r in _rows(final)]
    assert all(b > a for a, b in zip(wall, wall[1:]))  # the clock continues from the work state


class _Crash(Exception):
    pass


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                    reason="the tensorboard extra is not installed (pip install '.[tensorboard]')")
def test_tensorboard_events_read_back_once_per_step_after_a_crash(tmp_path, tiny_data_root, monkeypatch):
    """Two segments with train.tensorboard; the first crashes at step 17 after its work state
    at 10 (events 11–17 already flushed), is rerun, then the second runs. TensorBoard reads
    every step 1..24 once, with the CSV's values."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    p = tiny_params(train={"steps": 24, "segments": 2, "save_every": 5, "checkpoints": {"count": 2},
                           "tensorboard": True})
    root = _root(tmp_path, tiny_data_root)
    kw = dict(root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    real_step = loop_mod._SegmentState.train_step

    def crashing(self):
        if self.step == 11:  # after steps 1..11 are logged and the work state at 10 is saved
            raise _Crash
        return real_step(self)

    monkeypatch.setattr(loop_mod._SegmentState, "train_step", crashing)
    with pytest.raises(_Crash):
        train_segment(p, end=12, **kw)
    monkeypatch.setattr(loop_mod._SegmentState, "train_step", real_step)
    time.sleep(1.1)  # event file names carry the second they were opened in
    assert train_segment(p, end=12, **kw)["resumed_from_work_step"] == 10
    train_segment(p, end=24, **kw)

    acc = EventAccumulator(str(layout.fmt(layout.TENSORBOARD_DIR, root, **RUN)))
    acc.Reload()
    assert {f"train/{k}" for k in ("loss", "lr", "grad_norm", "theta_sq_norm", "tokens_per_s")} <= set(acc.Tags()["scalars"])
    events = acc.Scalars("train/loss")
    assert [e.step for e in events] == list(range(1, 25))
    csv_loss = [float(r["loss"]) for end in (12, 24)
                for r in _rows(layout.fmt(layout.SEGMENT_LOG, root, step=end, **RUN))]
    assert [e.value for e in events] == pytest.approx(csv_loss, rel=1e-6)


def test_tensorboard_without_the_package_is_one_line(tmp_path, tiny_data_root, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    p = tiny_params(train={"steps": 24, "segments": 2, "checkpoints": {"count": 2}, "tensorboard": True})
    with pytest.raises(ValueError, match=r"^train\.tensorboard: true needs the tensorboard package"):
        train_segment(p, end=12, root=_root(tmp_path, tiny_data_root), device="cpu", progress=False,
                      variant="adamw", lam=0.01, seed=0)
