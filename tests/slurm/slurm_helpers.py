"""Helpers for the tests on the real single-node SLURM cluster (see conftest.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "ci" / "slurm-cluster.sh"
REAL_PROFILE = REPO / "profiles" / "slurm"
CI_PROFILE = REPO / "tests" / "profiles" / "ci-slurm"
SLURMCTLD_PID = Path("/run/slurmctld.pid")
# slurm-logdir of profiles/slurm, relative to the workflow directory
SLURM_LOGDIR = "logs/slurm"

SUBMITTED_RE = re.compile(r"Job (\S+) has been submitted with SLURM jobid (\d+) \(log: (\S+?)\)\.?$", re.M)


def bounded(cmd: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def cluster_problem() -> str | None:
    """None if the CI cluster answers and its node can run jobs, else why not."""
    if shutil.which("sinfo") is None:
        return "SLURM client tools are not installed (ci/slurm-cluster.sh install)"
    # Cheap check first: against a dead controller sinfo retries for ~10 s.
    try:
        pid = int(SLURMCTLD_PID.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return f"slurmctld is not running (no live pid in {SLURMCTLD_PID}; run ci/slurm-cluster.sh start)"
    try:
        res = bounded(["sinfo", "-h", "-o", "%P|%t|%G"])
    except subprocess.TimeoutExpired:
        return "sinfo timed out"
    if res.returncode != 0:
        return f"sinfo failed: {res.stderr.strip()}"
    rows = [line.split("|") for line in res.stdout.split()]
    if not any(p.rstrip("*") == "debug" and st in ("idle", "mix", "alloc") for p, st, _ in rows):
        return f"partition 'debug' has no usable node: {res.stdout.strip()!r}"
    if not any("gpu:a100:" in g for _, _, g in rows):
        return f"node advertises no gpu:a100 GRES: {res.stdout.strip()!r}"
    return None


def active_jobs() -> set[str]:
    res = bounded(["squeue", "-h", "-o", "%A", "-t", "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED"])
    return set(res.stdout.split()) if res.returncode == 0 else set()




def job_info(jobid: str) -> dict[str, str]:
    """Fields of a (recent) job from `scontrol show job` (kept for MinJobAge=600 s)."""
    res = bounded(["scontrol", "show", "job", "-o", str(jobid)])
    assert res.returncode == 0, f"scontrol show job {jobid}: {res.stderr}"
    info: dict[str, str] = {}
    for tok in res.stdout.split():
        key, sep, val = tok.partition("=")
        if sep:
            info[key] = val
    return info


def job_state(jobid: str) -> str:
    res = bounded(["squeue", "-h", "-t", "all", "-j", str(jobid), "-o", "%T"])
    return res.stdout.strip()


def wait_job(jobid: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = job_state(jobid)
        if st in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"):
            return st
        time.sleep(0.25)
    raise AssertionError(f"job {jobid} not finished after {timeout}s (state {job_state(jobid)!r})")


def copy_repo(dest: Path) -> Path:
    """Copy the repository's files (tracked, plus untracked-but-not-ignored) into dest."""
    res = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    )
    for rel in filter(None, res.stdout.decode().split("\0")):
        src = REPO / rel
        if not src.is_file():
            continue  # deleted in the work tree
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, out)
    return dest


def job_env(workdir: Path | None = None) -> dict[str, str]:
    """Environment for snakemake: the venv first on PATH, so that the SLURM jobs
    (sbatch --export=ALL) find `villani` and `python`; and the copy's own src/ first on
    PYTHONPATH, so every job runs the code of the copy (the venv's editable install points
    at the live checkout, which may change while a long test runs)."""
    env = dict(os.environ)
    if workdir is not None and (workdir / "src" / "villani").is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(workdir / "src"), env.get("PYTHONPATH")]))
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if (Path(bindir) / "activate").exists():
        env["VIRTUAL_ENV"] = str(Path(bindir).parent)
    env.pop("PYTHONHOME", None)
    return env


@dataclass
class SnakemakeRun:
    args: list[str]
    returncode: int
    output: str
    seconds: float
    log: Path
    submitted: list[tuple[str, str, str]] = field(default_factory=list)  # (snakemake job, slurm jobid, log)

    def tail(self, n: int = 80) -> str:
        return "\n".join(self.output.splitlines()[-n:])


def snakemake(workdir: Path, *args: str, timeout: int = 900, log_name: str = "snakemake.out",
              env: dict[str, str] | None = None, popen: bool = False):
    """Run snakemake in workdir under `timeout -k` (snakemake may ignore SIGTERM); its
    output goes to <workdir>/../<log_name>.

    With popen=True returns (Popen, log path, start time) at once, for tests that act
    while it runs; finish with wait_run()."""
    cmd = ["timeout", "-k", "30", str(timeout), sys.executable, "-m", "snakemake", *args]
    log = workdir.parent / log_name
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env or job_env(workdir), stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    if popen:
        return proc, log, t0
    return wait_run(proc, log, t0, timeout + 60)


def wait_run(proc: subprocess.Popen, log: Path, t0: float, timeout: float) -> SnakemakeRun:
    """Wait for a snakemake started with snakemake(..., popen=True); kill its process
    group if it outlives timeout."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return finish_run(list(proc.args), proc.returncode, log, time.monotonic() - t0)


def finish_run(cmd: list[str], rc: int, log: Path, seconds: float) -> SnakemakeRun:
    out = log.read_text()
    return SnakemakeRun(cmd, rc, out, seconds, log, SUBMITTED_RE.findall(out))


def slurm_profiles() -> list[str]:
    return ["--profile", str(REAL_PROFILE), "--profile", str(CI_PROFILE)]


def unit_of(logdir_name: str) -> str:
    """The rule (``rule_<rule>``) or group (``group_<group>_<its rules>``) a SLURM log folder
    is named after; profiles/slurm names its groups after their one rule (train, measure)."""
    if logdir_name.startswith("group_"):
        return logdir_name.removeprefix("group_").split("_")[0]
    return logdir_name.removeprefix("rule_")


def slurm_logs(workdir: Path) -> dict[str, list[Path]]:
    """rule or group -> its SLURM job logs (<logdir>/rule_<name>/[wildcards/]<jobid>.log,
    <logdir>/group_<group>_<rules>/<jobid>.log)."""
    out: dict[str, list[Path]] = {}
    base = workdir / SLURM_LOGDIR
    for log in sorted([*base.glob("rule_*/**/*.log"), *base.glob("group_*/**/*.log")]):
        out.setdefault(unit_of(log.relative_to(base).parts[0]), []).append(log)
    return out


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def submitted_by_rule(run: SnakemakeRun, workdir: Path) -> dict[str, dict[str, list[str]]]:
    """rule or group -> wildcards path ('' if none) -> SLURM job ids, from snakemake's
    'has been submitted with SLURM jobid' lines (log path = <logdir>/rule_<r>/<wc>/<id>.log
    or <logdir>/group_<g>_<rules>/<id>.log)."""
    base = (workdir / SLURM_LOGDIR).resolve()
    out: dict[str, dict[str, list[str]]] = {}
    for _, jobid, log in run.submitted:
        rel = Path(log).resolve().relative_to(base)
        assert rel.name == f"{jobid}.log", log
        rule = unit_of(rel.parts[0])
        out.setdefault(rule, {}).setdefault("/".join(rel.parts[1:-1]), []).append(jobid)
    return out
