"""What `make run` shows (`villani run-lock --brief`, villani.dag.run_output): a real Snakemake
on a two-job workflow — the plan, a progress line per finished job and the closing lines at
the terminal, no job's input or output list; every error with the failed job's log; the
log file under .snakemake/log/ keeps each job's block whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

SNAKEFILE = """
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    log: "logs/a.log"
    shell: "echo a > {output} 2> {log}"

rule b:
    input: "a.txt"
    output: "b.txt"
    log: "logs/b.log"
    shell: "echo 'b went wrong here' > {log}; test -n \\"$OK\\"; cp {input} {output}"

onsuccess:
    print("closing summary line")
"""


def _brief(work: Path, ok: bool) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "villani.cli", "run-lock", "--brief", "--", str(BIN / "snakemake"), "--cores", "1",
           "--show-failed-logs", "--printshellcmds"]
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "OK": "1" if ok else ""}
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def work(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    return tmp_path


@pytest.mark.slow  # a real Snakemake run, 14 s on 2 idle cores: past test-fast's 3-minute budget
def test_a_run_shows_its_plan_progress_and_summary_and_logs_every_job_block(work):
    p = _brief(work, ok=True)
    shown = p.stdout + p.stderr
    assert p.returncode == 0, shown
    lines = shown.splitlines()
    assert "1 of 3 steps (33%) done: a" in lines and "2 of 3 steps (67%) done: b" in lines, shown
    assert "Job stats:" in lines and "closing summary line" in lines, shown
    assert not [x for x in lines if x.startswith(("    input:", "    output:", "rule ", "Shell command:"))], shown
    (log,) = (work / ".snakemake" / "log").glob("*.snakemake.log")
    full = log.read_text()
    assert "rule b:\n    input: a.txt\n    output: b.txt" in full and "Shell command: echo a > a.txt" in full


@pytest.mark.slow  # a real Snakemake run, 14 s on 2 idle cores: past test-fast's 3-minute budget
def test_a_failed_job_shows_its_error_and_its_log(work):
    p = _brief(work, ok=False)
    shown = p.stdout + p.stderr
    assert p.returncode != 0
    assert "Error in rule b:" in shown and "b went wrong here" in shown, shown
    assert "    log: logs/b.log (check log file(s) for error details)" in shown, shown
