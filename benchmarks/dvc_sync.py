"""Time what a Snakemake dry run costs after a DVC operation, and its parts.

    python benchmarks/dvc_sync.py --from /path/to/a/checkout/after/make/run [--rounds 3]

Copies the repository (tracked files) to a temporary folder, with ``results/``,
``.snakemake/``, ``dvc.lock`` and ``.dvc/cache`` of ``--from`` (a checkout where ``make run``
of ``params.yaml`` finished), commits the lock, runs the stages whose code changed since
(``dvc repro``), and times, each ``--rounds`` times
(median wall-clock, and CPU seconds of the command and its children):

- ``snakemake -n`` with nothing to do (the workspace is the one both engines last agreed on);
- ``snakemake -n`` right after ``dvc checkout --force`` restored one damaged output
  (``results/metrics/<dataset>.json``): ``dvc status``, then ``snakemake --touch --forceall``
  (villani.dag.dvc_sync.sync), then the dry run itself;
- ``dvc status --json`` alone;

each with ruamel.yaml's C parser (``ruamel.yaml.clib``, which ``make install`` installs) and
without it (hidden from every process of the command by a ``sitecustomize`` on
``PYTHONPATH``) — DVC parses dvc.yaml and dvc.lock with ruamel.yaml's safe loader. Timings
are machine-dependent; this is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.conftest import copy_repo  # noqa: E402  (the one repo-copy helper, shared with the tests)

BIN = Path(sys.executable).parent
NO_CLIB = "import sys\nsys.modules['_ruamel_yaml'] = None  # ruamel.yaml falls back to its pure-Python parser\n"


def timed(cmd: list[str], work: Path, env: dict[str, str], check=True) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and its children, output) of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if check and p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return wall, cpu, p.stdout + p.stderr


def setup(source: Path, dest: Path) -> Path:
    work = copy_repo(dest)
    for name in ("results", ".snakemake"):
        shutil.copytree(source / name, work / name, symlinks=True)
    shutil.rmtree(work / ".snakemake" / "locks", ignore_errors=True)
    shutil.rmtree(work / ".snakemake" / "incomplete", ignore_errors=True)
    shutil.copytree(source / ".dvc" / "cache", work / ".dvc" / "cache", symlinks=True)
    shutil.copy2(source / "dvc.lock", work / "dvc.lock")
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "make run"],
                # the stages whose code changed since --from's run (DVC hashes src/), recorded in dvc.lock
                [str(BIN / "dvc"), "repro"],
                ["git", "commit", "-qam", "make run here"]):
        p = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
        if p.returncode != 0 and cmd[-1] != "make run here":
            sys.exit(f"{' '.join(cmd)} failed:\n{(p.stdout + p.stderr)[-3000:]}")
    return work


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="source", type=Path, required=True,
                    help="a checkout after `make run` (results/, .snakemake/, dvc.lock, .dvc/cache)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from villani.plan.config import load_params

    dataset = load_params([args.source / "params.yaml"])["data"]["name"]
    with tempfile.TemporaryDirectory() as tmp:
        work = setup(args.source.resolve(), Path(tmp) / "repo")
        hide = Path(tmp) / "no-clib"
        hide.mkdir()
        (hide / "sitecustomize.py").write_text(NO_CLIB)
        base = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
        dry = [str(BIN / "snakemake"), "-n", "--profile", "profiles/local"]
        timed(dry, work, base)  # the first look: takes the copied results into Snakemake's records
        rows = []
        for label, env in (("with the C parser", base), ("pure-Python parser", dict(base, PYTHONPATH=str(hide)))):
            noop, synced, status = [], [], []
            for _ in range(args.rounds):
                noop.append(timed(dry, work, env)[:2])
                (work / f"results/metrics/{dataset}.json").write_text("{}\n")
                timed([str(BIN / "dvc"), "checkout", "--force"], work, env)
                wall, cpu, out = timed(dry, work, env)
                assert "recorded in Snakemake's metadata" in out and "Nothing to be done" in out, out[-2000:]
                synced.append((wall, cpu))
                status.append(timed([str(BIN / "dvc"), "status", "--json"], work, env)[:2])
            for what, xs in (("snakemake -n, nothing to do", noop),
                             ("snakemake -n after dvc checkout --force", synced), ("dvc status --json", status)):
                rows.append((label, what, statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)))
    print(f"{'':22} {'':42} {'wall s':>8} {'CPU s':>8}")
    for label, what, wall, cpu in rows:
        print(f"{label:22} {what:42} {wall:8.2f} {cpu:8.2f}")
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, medians of {args.rounds}")


if __name__ == "__main__":
    main()
