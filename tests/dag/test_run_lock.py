"""`make run` after a kill resumes by itself: `villani run-lock` removes a killed run's stale
Snakemake lock, and never touches the lock of a live run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from tests.conftest import copy_repo
from villani.dag.run_lock import LOCK_NAME, RunBusy, run_locked, stale_snakemake_locks
from villani.plan import layout

BIN = Path(sys.executable).parent


def _run_lock(*cmd, results="results"):
    return [sys.executable, "-m", "villani.cli", "run-lock", "--results", results, "--", *map(str, cmd)]


@pytest.mark.slow
def test_run_after_a_sigkilled_snakemake_resumes_by_itself(tmp_path):
    work = copy_repo(tmp_path / "repo")
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    target = str(layout.fmt(layout.DATA_STATS, "results", dataset="tiny"))
    snakemake = [str(BIN / "snakemake"), "--configfile", "tests/configs/tiny.yaml", "--cores", "1", target]
    proc = subprocess.Popen(_run_lock(*snakemake), cwd=work, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while not stale_snakemake_locks(work) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert stale_snakemake_locks(work), "Snakemake never locked its directory"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole run: wrapper, Snakemake and its job
    proc.wait()
    time.sleep(0.5)
    assert stale_snakemake_locks(work) and not (work / target).exists()
    # the bug: plain Snakemake stops on the stale lock
    plain = subprocess.run(snakemake, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "lock" in (plain.stdout + plain.stderr).lower()
    # through run-lock the next run removes it and completes
    out = subprocess.run(_run_lock(*snakemake), cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (work / target).exists() and not stale_snakemake_locks(work)
    assert "removing the Snakemake lock left by an interrupted run" in out.stderr


@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_live_run_is_named_by_pid_and_its_locks_are_left_alone(tmp_path):
    live = subprocess.Popen(_run_lock(sys.executable, "-c", "import time; time.sleep(60)"), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / "results" / LOCK_NAME
        deadline = time.time() + 60
        while "snakemake pid" not in (lock.read_text() if lock.exists() else "") and time.time() < deadline:
            time.sleep(0.05)
        locks = tmp_path / ".snakemake" / "locks"
        locks.mkdir(parents=True)
        (locks / "0.input.lock").write_text("results/x\n")  # the live run's own Snakemake lock
        out = subprocess.run(_run_lock("true"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        line = out.stderr.strip()
        assert "\n" not in line and line.startswith(f"villani: error: results/{LOCK_NAME}: a workflow run is using")
        assert f"pid {live.pid}" in line, line
        assert (locks / "0.input.lock").exists(), "a live run's Snakemake lock was removed"
    finally:
        live.send_signal(signal.SIGTERM)
        live.wait(timeout=30)


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    holder = subprocess.Popen(_run_lock(sys.executable, "-c", "import time; time.sleep(60)"), cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    lock = tmp_path / "results" / LOCK_NAME
    deadline = time.time() + 60
    while "snakemake pid" not in (lock.read_text() if lock.exists() else "") and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    out = subprocess.run(_run_lock(sys.executable, "-c", "print('ran')"), cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr


def test_the_lock_is_filelocks_a_filelock_holder_is_a_live_run(tmp_path):
    """run-lock takes filelock's lock (lock_descriptor): a ``FileLock`` on the same file contends with it."""
    results = tmp_path / "results"
    results.mkdir()
    with FileLock(results / LOCK_NAME, timeout=0):
        with pytest.raises(RunBusy, match=f"^{results / LOCK_NAME}: a workflow run is using"):
            run_locked(["true"], root=results, workdir=tmp_path)
    assert run_locked(["true"], root=results, workdir=tmp_path) == 0
    with FileLock(results / LOCK_NAME, timeout=0):  # and released when the run ends
        pass
