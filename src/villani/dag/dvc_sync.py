"""Snakemake and DVC over one results tree: one lock both honour, one record both read.

**The lock.** DVC guards every path a stage reads or writes with an entry ``{pid, cmd}`` in
``.dvc/tmp/rwlock``, and refuses to read or write a path that overlaps a live process's
write entry (it drops entries whose process is gone). A Snakemake run takes part in that
protocol: its ``onstart`` hook registers the Snakemake process as the writer of
``results/`` (:func:`claim`), its ``onsuccess``/``onerror`` hooks remove the entry
(:func:`release`). So while Snakemake runs, ``dvc repro`` (and ``dvc status``) refuse with
DVC's message naming the Snakemake PID and command, before deleting anything; and while a
DVC stage runs, Snakemake refuses to start with one line naming the DVC process. An entry
is only ever removed by its owner or, once its process has died, as stale — never under a
live run. The rwlock file is edited under DVC's own guard (``rwlock.lock``), with DVC's
own functions — private ones, called in one place (:func:`dvc_write_lock`).

**The records.** After a successful Snakemake run of the committed parameters, the outputs
are recorded in ``dvc.lock`` (:func:`record`, ``dvc commit --force``): ``dvc status``
then has nothing to do, and ``dvc repro`` recomputes nothing. The other way: whenever the
workspace is not the one both engines last agreed on — any ``dvc pull`` (whole or partial),
``dvc checkout`` (``--force`` too), ``dvc exp apply``, ``dvc repro``, ``git checkout`` of a
version (:mod:`villani.dag.workspace_state`: a digest of ``dvc.lock`` and of every file
under its outputs, no sentinel that a DVC command can leave stale) — the next Snakemake run
or dry run of ``params.yaml`` asks ``dvc status``; when DVC reports every stage up to date,
it first records what DVC made in Snakemake's own metadata with Snakemake's ``--touch
--forceall`` (:func:`sync`): its parameter, input and code triggers then compare against
what DVC made, and ``snakemake -n`` has nothing to do. A ``dvc.lock`` DVC cannot read stops
the run with one line naming the repair.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from villani.dag import workspace_state
from villani.plan import layout


class TreeBusy(RuntimeError):
    """Another engine is writing the results tree; ``str(err)`` is one line naming it."""


@dataclass
class Claim:
    """Snakemake's entry in DVC's rwlock (:func:`claim`); hand it to :func:`release`."""

    leave: Callable[[], None]  # from dvc_write_lock


def _dvc_tmp_dir(workdir: Path) -> Path | None:
    dvc_dir = workdir / ".dvc"
    return dvc_dir / "tmp" if dvc_dir.is_dir() else None


def _hardlink_lock(workdir: Path) -> bool:
    from dvc.config import Config

    try:
        return bool(Config(dvc_dir=str(workdir / ".dvc"), validate=False)["core"].get("hardlink_lock", False))
    except Exception:  # an unreadable config: DVC itself will say so; use its default
        return False


def dvc_write_lock(tmp_dir: Path, path: Path, cmd: str, hardlink: bool) -> Callable[[], None]:
    """Enter DVC's rwlock (``tmp_dir/rwlock``) as the writer of ``path`` for this process and
    ``cmd``; return the function that leaves it. :class:`TreeBusy` (message: the live
    holders, ``(PID n): cmd; …``) when a live process holds an overlapping path.

    The project's one use of DVC's private ``dvc.rwlock`` (with ``dvc.lock.LockError`` and
    ``dvc.fs.localfs``): a DVC release that changes them breaks here and in
    ``tests/conventions/test_dvc_sync.py``, nowhere else. No public route exists: DVC's Python
    API (``dvc.api``) only reads (``open``, ``read``, ``params_show``, …); its repository lock
    (``.dvc/tmp/lock``) is released while a stage's command runs (DVC pull request #2584:
    "release locks when running a command"), so during a stage the rwlock alone guards its
    outputs, and only DVC's own code edits that file safely (under ``rwlock.lock``).
    """
    from dvc.fs import localfs
    from dvc.lock import LockError
    from dvc.rwlock import rwlock

    cm = rwlock(str(tmp_dir), localfs, cmd, [], [str(path)], hardlink)
    try:
        cm.__enter__()
    except LockError as e:
        raise TreeBusy("; ".join(re.findall(r"\(PID \d+\): [^\n]*", str(e))) or str(e).splitlines()[0]) from None

    def leave() -> None:
        with contextlib.suppress(AssertionError, KeyError):  # the entry was removed by hand
            cm.__exit__(None, None, None)

    return leave


def claim(workdir: str | Path = ".", root: str = layout.RESULTS, cmd: str | None = None) -> Claim | None:
    """Register this process as the writer of ``<workdir>/<root>`` in DVC's rwlock
    (:func:`dvc_write_lock`).

    Returns None when ``workdir`` is no DVC project (nothing to coordinate with). Raises
    :class:`TreeBusy` (one line, naming the PID and command) when a live process holds a
    path under ``root`` — DVC running a stage, or another Snakemake run.
    """
    workdir = Path(workdir).resolve()
    tmp_dir = _dvc_tmp_dir(workdir)
    if tmp_dir is None:
        return None
    tmp_dir.mkdir(parents=True, exist_ok=True)
    try:
        leave = dvc_write_lock(tmp_dir, workdir / root, cmd or " ".join(sys.argv), _hardlink_lock(workdir))
    except TreeBusy as e:
        raise TreeBusy(f"{root}/ is being written by another process ({e}); "
                       "start again when it has finished") from None
    return Claim(leave)


def release(c: Claim | None) -> None:
    """Remove the entry :func:`claim` made (no-op for None)."""
    if c is not None:
        c.leave()


def holders(workdir: str | Path = ".") -> dict[str, Any]:
    """DVC's rwlock as it stands (``{"read": {path: [{pid, cmd}]}, "write": {path: {pid, cmd}}}``)."""
    import json

    tmp_dir = _dvc_tmp_dir(Path(workdir).resolve())
    path = tmp_dir / "rwlock" if tmp_dir else None
    if path is None or not path.exists():
        return {}
    with contextlib.suppress(ValueError):
        return json.loads(path.read_text() or "{}")
    return {}


def is_committed_params(config_files, overrides: Mapping | None, workdir: str | Path = ".") -> bool:
    """True when a Snakemake run read ``params.yaml`` alone — the parameters dvc.yaml reads.

    Only then do the run's outputs belong in ``dvc.lock``.
    """
    files = {Path(workdir, f).resolve() for f in config_files}
    return not overrides and files == {Path(workdir, "params.yaml").resolve()}


def _reason(output: str, returncode: int) -> str:
    """DVC's own reason from its output: its ``ERROR:`` lines (joined), else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR")]
    return "; ".join(errors) or (lines[-1] if lines else f"exit status {returncode}, no message")


SYNCING = "VILLANI_SNAKEMAKE_SYNC"  # set in the Snakemake that sync starts: it records nothing itself


# Snakemake options after which it runs no job and needs no record of what DVC made
_NO_JOBS = frozenset({"--lint", "--list-rules", "--list", "-l", "--list-target-rules", "--lt", "--report", "--touch",
                      "-t", "--unlock", "--cleanup-metadata", "--cm", "--dag", "--rulegraph", "--filegraph", "--summary",
                      "-S", "--detailed-summary", "-D", "--delete-all-output", "--delete-temp-output", "--containerize"})


def builds_jobs(argv) -> bool:
    """Whether a Snakemake command line runs (or dry-runs) jobs."""
    return not _NO_JOBS & set(argv)


def _dvc() -> str:
    dvc = Path(sys.executable).parent / "dvc"
    return str(dvc) if dvc.exists() else "dvc"


def dvc_status(workdir: str | Path = ".") -> tuple[dict | None, str]:
    """``dvc status --json``: (the stages DVC would run — empty when up to date —, "") or,
    when DVC cannot answer, (None, what it printed)."""
    try:
        p = subprocess.run([_dvc(), "status", "--json"], cwd=workdir, capture_output=True, text=True)
    except OSError as e:
        return None, f"cannot run dvc ({e.strerror})"
    if p.returncode != 0:
        return None, p.stderr + p.stdout or f"exit status {p.returncode}, no message"
    try:
        return json.loads(p.stdout.strip() or "{}"), ""
    except ValueError:
        return None, f"dvc status printed no JSON: {p.stdout.strip()[:200]}"


def _lock_refusal(output: str) -> str | None:
    """DVC's words when it refuses ``dvc.lock`` itself (``'./dvc.lock' validation failed`` /
    ``Lockfile 'dvc.lock' is corrupted`` / ``unable to read: 'dvc.lock'``), with the line that
    says where; None for any other failure."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if workspace_state.LOCK in line and re.search(r"validation failed|corrupt|invalid|unable to read", line, re.I):
            detail = next((x for x in lines[i + 1:i + 2] if not x[:1].isdigit()), "")
            return f"{line.removeprefix('ERROR:').strip()} {detail}".strip()
    return None


# Snakemake's touch executor sleeps Executor.SLEEPING_TIME (0.1 s) before each job, so that
# one job's files get a later mtime than the last job's even on a coarse file clock. Its
# check needs no such gap: an input counts as updated only when strictly newer than the
# job's oldest output, and touched in the DAG's order no input is. Without the pause the
# sync of the default's 38 jobs takes 2.5 s instead of 6.3, of PTB's 1,643 jobs seconds
# instead of 164 s of sleep. Set only when the attribute exists (a Snakemake that drops
# it still syncs, at its own pace; tests/conventions/test_dvc_sync.py notices).
_TOUCH = """import sys
from snakemake.executors import touch
if hasattr(touch.Executor, "SLEEPING_TIME"):
    touch.Executor.SLEEPING_TIME = 0.0
from snakemake.cli import main
sys.argv[0] = "snakemake"
sys.exit(main())
"""


def _touch(snakefile: str | Path, workdir: Path) -> str | None:
    """``snakemake --touch --forceall`` on ``params.yaml`` (without the touch executor's pause,
    :data:`_TOUCH`): Snakemake writes each job's parameters, inputs' checksums and code as if
    it had run it, and touches the outputs in the DAG's order. None when it did, else its
    reason."""
    cmd = [sys.executable, "-c", _TOUCH, "--snakefile", str(snakefile), "--touch", "--forceall", "--cores", "1",
           "--quiet", "all"]
    p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env={**os.environ, SYNCING: "1"})
    return None if p.returncode == 0 else _reason(p.stderr + p.stdout, p.returncode)


def sync(snakefile: str | Path, workdir: str | Path = ".") -> str | None:
    """At the parse of a Snakemake run or dry run of ``params.yaml``: when the workspace is
    not the one both engines last agreed on (:func:`workspace_state.seen`) and DVC reports
    every stage up to date, take what DVC made into Snakemake's metadata (:func:`_touch`)
    and remember the state. Returns a line for the log (None: nothing to do).

    Raises :class:`~villani.dag.workspace_state.LockInvalid` (one line with the repair) when
    ``dvc.lock`` cannot be read, by our checks or by DVC's. When DVC has stages to run, it
    says which, and Snakemake decides on its own records; nothing is remembered, so the
    next run asks DVC again — after a partial ``dvc pull``, the complete one is seen."""
    workdir = Path(workdir)
    if os.environ.get(SYNCING):
        return None
    lock = workspace_state.read_lock(workdir)
    if lock is None or not (workdir / layout.RESULTS).is_dir():
        return None
    if workspace_state.seen(workspace_state.state(workdir, lock), workdir):
        return None
    status, reason = dvc_status(workdir)
    if status is None:
        refused = _lock_refusal(reason)
        if refused:
            raise workspace_state.lock_invalid(workdir, f"refused by DVC ({refused})")
        return f"Snakemake's record not synced with {workspace_state.LOCK}: {_reason(reason, 1)}"
    if status:
        names = sorted(status)
        return (f"dvc status: {len(names)} stage(s) to run ({', '.join(names[:4])}{', …' if len(names) > 4 else ''}): "
                "Snakemake decides on its own records")
    failed = _touch(snakefile, workdir)
    if failed:
        return f"Snakemake's record not synced with {workspace_state.LOCK}: {failed}"
    workspace_state.remember(workdir)
    return "results/ as DVC made them (dvc.lock) recorded in Snakemake's metadata"


def record(workdir: str | Path = ".") -> str:
    """Record the workspace's outputs in ``dvc.lock`` (``dvc commit --force``); return a line
    saying what happened (also when DVC is absent or fails — with DVC's own reason: the run
    itself succeeded)."""
    workdir = Path(workdir)
    if _dvc_tmp_dir(workdir.resolve()) is None or not (workdir / "dvc.yaml").exists():
        return "dvc.lock: no DVC project here, nothing recorded"
    cmd = [_dvc(), "commit", "--force"]
    try:
        p = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=os.environ.copy())
    except OSError as e:
        return f"dvc.lock not updated: cannot run dvc ({e.strerror})"
    if p.returncode != 0:
        return f"dvc.lock not updated: `dvc commit --force` failed: {_reason(p.stderr + p.stdout, p.returncode)}"
    workspace_state.remember(workdir)
    return "dvc.lock: outputs recorded (dvc status: up to date)"
