"""Fault injection over the documented commands `villani prune`, `villani diagnose` and
`villani train`: killed at a random point, a full disk, a bad input. Every
file under results/ that was complete before is still there with the same bytes (hashed
before and after), except what the command is meant to delete; a rerun completes.

One tiny run, trained and measured once per module (the documentation's order: train, measure,
prune); each test works on its own copy.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from tests.hardening.runs import train_tiny_run
from villani.dag.prune import prunable
from villani.plan import layout
from villani.plan.runs import Run
from villani.plan.schedule import checkpoint_steps

RUN = Run("tiny", "adamw", 0.01, 0)


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _villani(*args) -> list[str]:
    return [sys.executable, "-m", "villani.cli", *map(str, args)]


@pytest.fixture(scope="module")
def measured(tmp_path_factory, tiny_data_root):
    """Params (one run) and a results folder with that run trained and every checkpoint measured."""
    from villani.measure import measure_checkpoint

    p = tiny_params(train={"lambdas": [0.01], "langevin": {"lambdas": []}})
    params, root = train_tiny_run(p, tmp_path_factory.mktemp("faults"), tiny_data_root)
    for step in checkpoint_steps(p["train"]):
        measure_checkpoint(p, variant="adamw", lam=0.01, seed=0, step=step, root=root, device="cpu")
    return p, params, root


@pytest.fixture()
def copy(measured, tmp_path):
    p, params, root = measured
    shutil.copytree(root, tmp_path / "results")
    return p, params, tmp_path / "results"


def _kill_after(cmd, delay: float) -> int | None:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait()


@pytest.mark.parametrize("trial", range(2))
@pytest.mark.slow  # 12 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_prune_killed_at_a_random_point_loses_only_what_it_prunes_and_reruns(copy, trial):
    p, params, root = copy
    before = _hashes(root)
    doomed = {str(f.relative_to(root)) for f in prunable(p, root)}
    assert doomed and all(f.endswith(("model.safetensors", "state.pt")) for f in doomed)
    _kill_after(_villani("prune", "--params", params, "--results", root), random.Random(trial).uniform(0.3, 4.0))
    after = _hashes(root)
    assert {k: v for k, v in before.items() if k not in doomed} == {k: v for k, v in after.items() if k not in doomed}
    subprocess.run(_villani("prune", "--params", params, "--results", root), check=True, capture_output=True)
    assert _hashes(root) == {k: v for k, v in before.items() if k not in doomed}


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_prune_with_bad_input_is_one_line_and_deletes_nothing(copy, tmp_path):
    p, params, root = copy
    before = _hashes(root)
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {checkpoints: {count: -1}}\n")
    out = subprocess.run(_villani("prune", "--params", bad, "--results", root), capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and str(bad) in out.stderr
    assert _hashes(root) == before


def _diagnose_cmd(root: Path, out: Path) -> list[str]:
    return _villani("diagnose", "--model", RUN.path(layout.CKPT_DIR, root, step=24), "--data", "builtin:pydoc",
                    "--seq-len", "32", "--blocks", "2", "--probes", "4", "--top-k", "2", "--lanczos-steps", "3",
                    "--device", "cpu", "--out", out)


@pytest.mark.parametrize("trial", range(1))
@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_diagnose_killed_at_a_random_point_leaves_results_and_no_partial_output(copy, tmp_path, trial):
    _, _, root = copy
    before = _hashes(root)
    out = tmp_path / "diag"
    _kill_after(_diagnose_cmd(root, out), random.Random(10 + trial).uniform(1.0, 6.0))
    assert _hashes(root) == before
    written = {f.name for f in out.iterdir()} if out.exists() else set()
    assert not {f for f in written if f.endswith(".tmp")}
    assert "diagnosis.json" not in written or "psi_of_lambda.csv" in written  # the JSON is written last
    subprocess.run(_diagnose_cmd(root, out), check=True, capture_output=True)
    assert (out / "diagnosis.json").exists()


@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_diagnose_on_a_full_disk_is_one_line_naming_the_file(copy, tmp_path):
    _, _, root = copy
    before = _hashes(root)
    mnt = tmp_path / "full"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root); test_disk_full_names_the_file_being_written covers it")
    try:
        (mnt / "filler").write_bytes(b"x" * 4096)
        out = subprocess.run(_diagnose_cmd(root, mnt / "diag"), capture_output=True, text=True)
        lines = [ln for ln in out.stderr.strip().splitlines() if " INFO " not in ln]
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert "no space left on device" in lines[0] and str(mnt / "diag") in lines[0]
        assert not list((mnt / "diag").glob(".*.tmp")) if (mnt / "diag").exists() else True
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    assert _hashes(root) == before


@pytest.mark.slow  # 6 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_train_with_a_corrupt_checkpoint_is_one_line_and_keeps_every_file(copy):
    """Bad input to `villani train --until 24`: the checkpoint it would resume from is corrupt
    — one line naming it and the segment to retrain; nothing under results/ changes. (`--all`
    retrains that segment: tests/hardening/test_suggested_commands.py.)"""
    p, params, root = copy
    (RUN.path(layout.SEGMENT, root, step=24)).unlink()
    weights = RUN.path(layout.CKPT_WEIGHTS, root, step=12)
    weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
    before = _hashes(root)
    out = subprocess.run(_villani("train", "--params", params, "--results", root, "--lam", "0.01", "--seed", "0",
                                  "--until", "24", "--device", "cpu"), capture_output=True, text=True)
    lines = [ln for ln in out.stderr.strip().splitlines() if " INFO " not in ln]
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert str(weights) in lines[0] and "--until 12`" in lines[0]
    assert _hashes(root) == before
