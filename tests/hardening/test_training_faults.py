"""Faults around training: kills at random points, a full disk, corrupt and foreign files."""

from __future__ import annotations

import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.schedule import checkpoint_steps, segment_ends
from villani.training import train_segment
from villani.training.checkpoint import read_meta

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)


def _data(root: Path, tiny_data_root: Path) -> Path:
    shutil.copytree(tiny_data_root / "data", root / "data")
    return root


def _cli(params: Path, root: Path, *extra) -> list[str]:
    return [sys.executable, "-m", "villani.cli", "train", "--params", str(params), "--results", str(root),
            "--lam", "0.01", "--seed", "0", "--device", "cpu", *extra]


_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING) villani[.\w]*: ")


def _non_log_lines(stderr: str) -> list[str]:
    """stderr without the timestamped progress/log lines a job writes while it works."""
    return [ln for ln in stderr.strip().splitlines() if not _LOG_LINE.match(ln)]


def _final_sha(root: Path, p) -> str:
    return sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=p["train"]["steps"], **RUN))


@pytest.fixture(scope="module")
def killable(tmp_path_factory, tiny_data_root):
    """Params of a run long enough to kill, and its uninterrupted reference weights."""
    tmp = tmp_path_factory.mktemp("kill")
    p = tiny_params(train={"steps": 90, "segments": 3, "save_every": 7, "checkpoints": {"count": 6}})
    params = tmp / "p.yaml"
    dump_yaml(p, params)
    ref = _data(tmp / "ref", tiny_data_root)
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=ref, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    return p, params, _final_sha(ref, p), ref


@pytest.mark.parametrize("trial", range(3))
@pytest.mark.slow  # 36 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_sigkill_at_random_points_then_rerun_is_bit_identical(trial, tmp_path, tiny_data_root, killable):
    """SIGKILL `villani train --all` after a random delay (any phase: import, step, checkpoint
    write, work-state write), up to three times, then let it finish: same final weights,
    every checkpoint verifies against its sha256, no temporary file is left behind."""
    p, params, ref, _ = killable
    root = _data(tmp_path, tiny_data_root)
    rng = random.Random(1000 + trial)
    for _ in range(3):
        proc = subprocess.Popen(_cli(params, root, "--all"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(2.0, 9.0))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    subprocess.run(_cli(params, root, "--all"), check=True, capture_output=True)
    assert _final_sha(root, p) == ref
    for step in checkpoint_steps(p["train"]):
        read_meta(root, step=step, **RUN)  # raises if any file is torn or mismatched
    assert not list(root.rglob("*.tmp"))


@pytest.mark.slow  # 12 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_disk_full_mid_training_is_one_line_and_keeps_earlier_results(tmp_path, tiny_data_root, killable):
    p, params, ref, ref_root = killable
    mnt = tmp_path / "small"
    mnt.mkdir()
    # room for the data and about half of what the whole run writes: the disk fills mid-run
    def du(d):
        return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())

    size_kb = (du(ref_root / "data") + du(ref_root / "runs") // 2) // 1024 + 64
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mnt)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root); the injected-ENOSPC test covers the I/O layer")
    try:
        root = _data(mnt / "results", tiny_data_root)
        out = subprocess.run(_cli(params, root, "--all"), capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        err = _non_log_lines(out.stderr)
        assert len(err) == 1 and "no space left on device" in err[0], out.stderr
        written = [s for s in checkpoint_steps(p["train"])
                   if layout.fmt(layout.CKPT_META, root, step=s, **RUN).exists()]
        assert written, "the disk should have held at least the first checkpoint"
        for s in written:  # no torn file (the unfinished segment's checkpoints are not listed by a manifest yet)
            meta = read_meta(root, step=s, verify=False, **RUN)
            for key, pattern in (("weights_sha256", layout.CKPT_WEIGHTS), ("config_sha256", layout.CKPT_CONFIG)):
                assert sha256_file(layout.fmt(pattern, root, step=s, **RUN)) == meta[key]
        assert not list(root.rglob("*.tmp"))
        # free space (bigger disk) and rerun: finishes, identical to the reference
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        subprocess.run(_cli(params, root, "--all"), check=True, capture_output=True)
        assert _final_sha(root, p) == ref
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_injected_enospc_in_atomic_write_leaves_old_file(tmp_path, monkeypatch):
    import errno
    import os

    from villani.io import atomic

    target = tmp_path / "x.json"
    atomic.write_json(target, {"a": 1})
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        atomic.write_json(target, {"a": 2})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert atomic.read_json(target) == {"a": 1}
    assert not list(tmp_path.glob("*.tmp"))


@pytest.fixture()
def trained(tmp_path, tiny_data_root):
    p = tiny_params()
    root = _data(tmp_path / "results", tiny_data_root)
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    params = tmp_path / "p.yaml"
    dump_yaml(p, params)
    return p, params, root


def _one_line_error(cmd) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = _non_log_lines(out.stderr)
    assert len(lines) == 1 and lines[0].startswith("villani: error: "), out.stderr
    return lines[0]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
@pytest.mark.slow  # 18 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_corrupt_checkpoint_is_named_in_one_line(damage, trained):
    p, params, root = trained
    weights = layout.fmt(layout.CKPT_WEIGHTS, root, step=12, **RUN)
    data = weights.read_bytes()
    weights.write_bytes({"truncate": data[: len(data) // 2], "garbage": b"\x00junk" * 50,
                         "flip": data[:-10] + bytes(10)}[damage])
    # resuming training from that checkpoint must refuse it (`--all` retrains its segment instead)
    (layout.fmt(layout.SEGMENT, root, step=24, **RUN)).unlink()
    msg = _one_line_error(_cli(params, root, "--until", "24"))
    assert str(weights) in msg and ("sha256" in msg or "corrupt" in msg)


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_corrupt_token_file_is_named_in_one_line(trained):
    p, params, root = trained
    blocks = layout.fmt(layout.SPLIT, root, dataset="tiny", split="train")
    blocks.write_bytes(blocks.read_bytes()[:100])
    shutil.rmtree(layout.fmt(layout.RUN_DIR, root, **RUN))
    msg = _one_line_error(_cli(params, root, "--all"))
    assert str(blocks) in msg


def test_checkpoint_of_another_shape_is_rejected(trained, tiny_data_root):
    from villani.model.causal_lm import build_model, load_weights

    p, _, root = trained
    other = build_model({**p["model"], "config": {**p["model"]["config"], "hidden_size": 8, "intermediate_size": 16}},
                        300, 32, seed=0)
    weights = layout.fmt(layout.CKPT_WEIGHTS, root, step=12, **RUN)
    with pytest.raises(ValueError, match=r"has shape .* the model expects"):
        load_weights(other, weights)


def test_nonfinite_skip_mode_finishes(tmp_path, tiny_data_root, monkeypatch):
    """With train.nonfinite: skip, a step whose loss is NaN is skipped and logged."""
    import pandas as pd
    import torch

    from villani.training import loop

    p = tiny_params(train={"nonfinite": "skip", "segments": 1})
    root = _data(tmp_path / "results", tiny_data_root)
    real_ce = loop._SegmentState.ce
    calls = {"n": 0}

    def flaky(self, x):
        calls["n"] += 1
        out = real_ce(self, x)
        return out * float("nan") if calls["n"] == 5 else out

    monkeypatch.setattr(loop._SegmentState, "ce", flaky)
    train_segment(p, end=24, root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    log = pd.read_csv(layout.fmt(layout.SEGMENT_LOG, root, step=24, **RUN))
    assert log["skipped"].sum() == 1
    assert torch.isfinite(torch.tensor(read_meta(root, step=24, **RUN)["theta_sq_norm"]))


def test_stale_temporaries_of_a_killed_writer_are_removed_by_the_next_segment(tmp_path, tiny_data_root):
    """A SIGKILL during an atomic write leaves `.<name>.<hex>.tmp` (the writer cannot clean up);
    the next training job of that run removes such files from its own folders only."""
    p = tiny_params(train={"steps": 20, "segments": 1, "checkpoints": {"count": 2}})
    root = _data(tmp_path, tiny_data_root)
    ckpt = layout.fmt(layout.CKPT_WEIGHTS, root, step=10, **RUN).parent
    work = layout.fmt(layout.WORK_DIR, root, **RUN)
    measure = layout.fmt(layout.MEASURE_JSON, root, step=10, **RUN).parent
    planted = [ckpt / ".step0000010.safetensors.0123456789ab.tmp", work / ".state.pt.a1b2c3d4e5f6.tmp",
               measure / ".step0000010.json.0123456789ab.tmp"]
    keep = ckpt / ".notes.tmp"  # not an atomic-write temporary: left alone
    for f in [*planted, keep]:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"torn")
    train_segment(p, end=20, root=root, device="cpu", progress=False, **{k: RUN[k] for k in ("variant", "lam", "seed")})
    assert not planted[0].exists() and not planted[1].exists()
    assert planted[2].exists(), "measure/ has its own writers: not swept by training"
    assert keep.exists()
