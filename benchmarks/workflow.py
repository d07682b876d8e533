"""Time the default workflow end to end, and training throughput.

    python benchmarks/workflow.py [--cores 2] [--configfile extra.yaml] [--keep DIR]

Copies the repository (tracked files) to a temporary folder, runs
``snakemake --profile profiles/local`` there on the embedded default (``params.yaml``), and
prints the total wall-clock, the time of a second (no-op) invocation, per rule the sum and
median of its jobs' run times (Snakemake's start/end times in ``.snakemake/metadata``),
and training tokens/s (median over all logged steps of all runs). Timings are
machine-dependent; this is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.conftest import copy_repo  # noqa: E402  (the one repo-copy helper, shared with the tests)


def job_times(work: Path) -> dict[str, list[float]]:
    """Per rule, the run time of each job from Snakemake's metadata (starttime/endtime)."""
    out = defaultdict(list)
    for meta in (work / ".snakemake" / "metadata").glob("*"):
        try:
            rec = json.loads(meta.read_text())
        except (ValueError, OSError):
            continue
        if rec.get("starttime") and rec.get("endtime") and rec.get("rule"):
            # metadata is per output file; every job has its own log file, so key jobs by it
            out[(rec["rule"], tuple(rec.get("log") or ()))].append((rec["starttime"], rec["endtime"]))
    per_rule = defaultdict(list)
    for (rule, _), spans in out.items():
        per_rule[rule].append(max(e for _, e in spans) - min(s for s, _ in spans))
    return dict(per_rule)


def tokens_per_s(work: Path) -> float:
    import pandas as pd

    vals = []
    for log in (work / "results" / "runs").rglob("logs/seg*.csv"):
        vals += list(pd.read_csv(log)["tokens_per_s"])
    return statistics.median(vals) if vals else float("nan")


def snakemake(cmd: list[str], work: Path, env: dict[str, str]) -> None:
    """Run ``cmd`` in ``work``; on failure, Snakemake's last 40 lines of output and exit 1."""
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).splitlines()[-40:]
        sys.exit(f"{' '.join(cmd)} failed (rc {p.returncode}) in {work}:\n" + "\n".join(tail))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", default="2")
    ap.add_argument("--configfile", action="append", default=[])
    ap.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="villani-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    copy_repo(work)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    cmd = [str(Path(sys.executable).parent / "snakemake"), "--profile", "profiles/local", "--cores", args.cores]
    if args.configfile:  # one --configfile with every file: a second --configfile would replace the first
        cmd += ["--configfile", *(str(Path(c).resolve()) for c in args.configfile)]
    t0 = time.perf_counter()
    snakemake(cmd, work, env)
    total = time.perf_counter() - t0
    t1 = time.perf_counter()
    snakemake(cmd + ["-n"], work, env)
    noop = time.perf_counter() - t1
    print(f"default workflow: {total:.1f} s wall on {args.cores} cores ({work})")
    print(f"second invocation (nothing to do): {noop:.1f} s")
    print(f"{'rule':<16}{'jobs':>6}{'sum s':>10}{'median s':>10}")
    for rule, ts in sorted(job_times(work).items(), key=lambda kv: -sum(kv[1])):
        print(f"{rule:<16}{len(ts):>6}{sum(ts):>10.1f}{statistics.median(ts):>10.2f}")
    print(f"training throughput: median {tokens_per_s(work):,.0f} tokens/s per step (1 thread per job)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
