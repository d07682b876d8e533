"""One writer per run (issue 40, item 2), with two real processes on one run: a second
`villani train` of a run is refused in one line naming the first (pid, command); so is a
`villani measure` of a checkpoint the first is rewriting, and a second measure of the same
checkpoint — while a measure of a checkpoint the training does not touch runs beside it (the
workflow measures early checkpoints while later segments train). A step log another process
wrote into is never published: the segment is not marked done, and the rerun trains it
again. The first process is caught holding its lock and stopped (SIGSTOP) while the second
tries, then continued (SIGCONT)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from villani.io.results import training_log
from villani.plan import layout
from villani.plan.runs import Run

RUN = Run("tiny", "adamw", 0.01, 0)
VILLANI = str(Path(sys.executable).parent / "villani")


@pytest.fixture()
def copy(copy):
    """The trained copy without the finished segments' copies: `--until 24` trains, never restores."""
    shutil.rmtree(RUN.path(layout.WORK_DIR, copy[2]) / "done")
    return copy


def _argv(command: str, params, root, *extra) -> list[str]:
    return [VILLANI, command, "--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0",
            "--device", "cpu", "--log-level", "WARNING", *extra]


def _start(argv) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))


def _caught_holding(proc: subprocess.Popen, lock: Path, timeout: float = 300) -> None:
    """Stop ``proc`` (SIGSTOP) as soon as ``lock`` names it as its holder."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            holder = json.loads(lock.read_text() or "{}")
        except (OSError, ValueError):
            holder = {}
        if holder.get("pid") == proc.pid:
            os.kill(proc.pid, signal.SIGSTOP)
            return
        time.sleep(0.005)
    raise AssertionError(f"{proc.args} never held {lock}")


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err.strip()


def _run(argv) -> tuple[int, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return done.returncode, done.stderr.strip()


@pytest.mark.slow  # 9 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_second_train_of_a_run_is_refused_naming_the_first(copy, tmp_path):
    p, params, _ = copy
    root = tmp_path / "fresh"
    shutil.copytree(copy[2] / "data", root / "data")
    lock = RUN.path(layout.TRAIN_LOCK, root)
    first = _start(_argv("train", params, root, "--all"))
    _caught_holding(first, lock)
    try:
        rc, err = _run(_argv("train", params, root, "--all"))
    finally:
        rc1, err1 = _finish(first)
    assert rc == 2 and "\n" not in err, err
    assert err.startswith(f"villani: error: {lock}: run {RUN.path(layout.RUN_DIR, root)} is being written by another "
                          f"process (pid {first.pid}: villani train --params {params}"), err
    assert "(writes checkpoints 0–24)" in err
    assert rc1 == 0, err1
    reference = json.loads(RUN.path(layout.CKPT_META, copy[2], step=24).read_text())
    assert json.loads(RUN.path(layout.CKPT_META, root, step=24).read_text())["weights_sha256"] == \
        reference["weights_sha256"]
    assert list(training_log(p, RUN, root)["step"]) == list(range(1, 25))


@pytest.mark.slow  # 16 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_measure_is_refused_on_a_checkpoint_being_retrained_but_runs_beside_it(copy):
    _, params, root = copy
    first = _start(_argv("train", params, root, "--until", "24"))  # rewrites checkpoints 13…24
    _caught_holding(first, RUN.path(layout.TRAIN_LOCK, root))
    try:
        rc, err = _run(_argv("measure", params, root, "--step", "18"))
        rc_beside, err_beside = _run(_argv("measure", params, root, "--step", "6"))
    finally:
        rc1, err1 = _finish(first)
    assert rc == 2 and "\n" not in err, err
    assert f"{RUN.path(layout.CKPT_DIR, root, step=18)}: being written by another process (pid {first.pid}: " \
           "villani train" in err and "(writes checkpoints 13–24)" in err, err
    assert not RUN.path(layout.MEASURE_JSON, root, step=18).exists()
    assert rc_beside == 0, err_beside
    assert rc1 == 0, err1


@pytest.mark.slow  # 15 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_second_measure_of_one_checkpoint_is_refused(copy):
    _, params, root = copy
    lock = RUN.path(layout.MEASURE_LOCK, root, step=24)
    first = _start(_argv("measure", params, root, "--step", "24"))
    _caught_holding(first, lock)
    try:
        rc, err = _run(_argv("measure", params, root, "--step", "24"))
    finally:
        rc1, err1 = _finish(first)
    assert rc == 2 and "\n" not in err, err
    out = RUN.path(layout.MEASURE_JSON, root, step=24)
    assert f"{lock}: the measurement {out} is being written by another process (pid {first.pid}: villani measure" in err
    assert rc1 == 0 and out.exists(), err1


@pytest.mark.slow  # 19 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_step_log_written_into_by_another_process_is_not_published(copy):
    """What a second writer did to the log before the lock (it opened the log afresh:
    truncated to its header) while the first trains: the first's next rows land after a
    block of NULs. The segment ends with one line naming the log, no manifest says it is
    done, its checkpoints are refused, and the command its line prints trains it again
    with a clean log."""
    p, params, root = copy
    partial = RUN.path(layout.SEGMENT_LOG_PARTIAL, root, step=24)
    first = _start(_argv("train", params, root, "--until", "24"))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # caught after its third step (of 12)
        assert first.poll() is None, first.communicate()
        if partial.exists() and partial.read_bytes().count(b"\n") >= 4:
            os.kill(first.pid, signal.SIGSTOP)
            break
        time.sleep(0.002)
    header = partial.read_text().splitlines()[0]
    partial.write_text(header + "\n")  # the second writer's fresh log
    rc, err = _finish(first)
    assert rc == 2 and "\n" not in err, err
    assert err.startswith(f"villani: error: {partial}: ") and "the segment is not marked done" in err, err
    cmd = re.findall(r"`(villani [^`]+)`", err)[-1]  # the line's own command: train the segment again
    assert cmd.endswith("--dataset tiny --variant adamw --lam 0.01 --seed 0 --until 24"), err
    assert not RUN.path(layout.SEGMENT, root, step=24).exists()
    rc, err = _run(_argv("measure", params, root, "--step", "18"))
    assert rc == 2 and "no segment manifest lists it" in err, err
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", OMP_NUM_THREADS="1")
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert list(training_log(p, RUN, root)["step"]) == list(range(1, 25))


def test_a_junk_row_in_a_published_log_is_named_by_the_reader(copy, capsys):
    """A step log damaged after its segment ended: the figures' and metrics' reader names
    the row instead of moving t₉₀."""
    from villani.cli import main

    _, params, root = copy
    log = RUN.path(layout.SEGMENT_LOG, root, step=24)
    log.write_text(log.read_text() + "54840001994,0\n")
    with pytest.raises(ValueError, match=r"seg0000024.csv: row 13: step 54840001994 after the last step 24 \(steps 13…24 once each"):
        training_log(tiny_params(), RUN, root)
    assert main(["train", "--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0", "--all",
                 "--device", "cpu", "--log-level", "WARNING"]) == 0
    assert "segment 12→24: trained" in capsys.readouterr().out  # the log is not the one its manifest recorded
