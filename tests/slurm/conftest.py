"""Fixtures for the tests that run on the real single-node SLURM cluster.

The cluster itself is started and stopped outside pytest, by `ci/slurm-cluster.sh start`
/ `stop` (see `.ci/run`). Here we only check that it answers, and clean up the jobs a
test leaves behind.

Without a cluster the tests FAIL when the environment variable CI is set (a broken
cluster start must never pass as "nothing ran"), and skip with the reason otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The helpers live next to this file; make them importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))

from slurm_helpers import active_jobs, bounded, cluster_problem  # noqa: E402


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    problem = cluster_problem()
    if problem is None:
        return
    msg = f"SLURM CI cluster unavailable: {problem}"
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI is set: this is a failure, not a skip)", pytrace=False)
    pytest.skip(msg + " (set CI=1 to make this a failure)")


class Guard:
    """What a test started: snakemake processes (killed by process group at teardown)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def watch(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc


@pytest.fixture
def slurm(slurm_cluster):
    """Per-test guard: afterwards, kill the snakemake processes the test registered and
    cancel every job it left queued or running (only those; earlier jobs are left alone)."""
    before = active_jobs()
    guard = Guard()
    yield guard
    for proc in guard.procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    left = sorted(active_jobs() - before, key=int)
    if left:
        bounded(["scancel", *left])
        deadline = time.monotonic() + 60
        while active_jobs() & set(left) and time.monotonic() < deadline:
            time.sleep(0.5)


