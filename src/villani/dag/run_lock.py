"""One workflow run at a time on a results tree, and a killed run's Snakemake lock removed
by the next run (``villani run-lock -- snakemake …``; ``make run`` goes through it).

Snakemake locks its working directory (``.snakemake/locks/``) for the length of a run and
removes the lock when the run ends — unless the run is killed (SIGKILL, a closed terminal,
an out-of-memory kill), after which every later run stops with "Directory cannot be
locked" until someone runs ``snakemake --unlock``. Snakemake cannot tell a stale lock from
a live run's, so it never removes one itself.

Our own lock can tell: :func:`run_locked` locks ``results/.villani.lock`` (filelock's
:func:`~filelock.lock_descriptor`: ``fcntl.flock`` on Unix) before starting Snakemake and
hands the descriptor to it, so the lock is held exactly as long as the wrapper or Snakemake
lives — the kernel drops it when both are gone, however they died. Holding it therefore
proves that no run started this way is alive; when no other Snakemake process runs in the
working directory either (checked in ``/proc`` where there is one), a Snakemake lock left
in ``.snakemake/locks/`` is stale, and ``snakemake --unlock`` (same arguments) removes it
before the run starts. When a live process holds our lock, :class:`RunBusy` names its pid
in one line and nothing is unlocked.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from filelock import lock_descriptor

__all__ = ["LOCK_NAME", "RunBusy", "run_locked", "stale_snakemake_locks", "live_snakemake"]

LOCK_NAME = ".villani.lock"
log = logging.getLogger(__name__)


class RunBusy(ValueError):
    """Another workflow run is alive on this results tree; ``str(err)`` names its pid."""


def stale_snakemake_locks(workdir: str | Path) -> list[Path]:
    """Snakemake's lock files in ``workdir`` (left behind only by a run that did not end)."""
    locks = Path(workdir) / ".snakemake" / "locks"
    return sorted(locks.glob("*.lock")) if locks.is_dir() else []


def live_snakemake(workdir: str | Path) -> list[int]:
    """Pids of Snakemake processes whose working directory is ``workdir`` (from ``/proc``;
    empty where there is none)."""
    workdir = Path(workdir).resolve()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if int(proc.name) == os.getpid() or (proc / "cwd").resolve() != workdir:
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")[:3]
        except (OSError, ValueError):
            continue
        if any(Path(a.decode(errors="replace")).name == "snakemake" for a in argv):
            pids.append(int(proc.name))
    return pids


def _holder(lock: Path) -> str:
    try:
        return lock.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def run_locked(cmd: Sequence[str], root: str | Path = "results", workdir: str | Path = ".", brief: bool = False) -> int:
    """Run ``cmd`` (a Snakemake command line) holding ``root/.villani.lock``; remove a stale
    Snakemake lock first (``cmd + ["--unlock"]``). Returns the command's exit status;
    :class:`RunBusy` when a live run holds the lock or a Snakemake process runs in ``workdir``.
    ``brief``: show only what :class:`~villani.dag.run_output.BriefOutput` keeps of the
    command's output (its log file keeps all of it)."""
    if not cmd:
        raise ValueError("run-lock: no command given (usage: villani run-lock -- snakemake …)")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    # filelock's lock on a descriptor we own, not a FileLock: Snakemake inherits the descriptor
    # (pass_fds) so the lock outlives the wrapper, and the holder's pids are written into the
    # file — a FileLock keeps its descriptor private and its lock ends with the process.
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not lock_descriptor(fd, blocking=False):
            raise RunBusy(f"{lock}: a workflow run is using {root} ({_holder(lock)}); wait for it to end "
                          "or stop it, then run again")
        _write_holder(fd, f"pid {os.getpid()}")
        if stale_snakemake_locks(workdir):
            live = live_snakemake(workdir)
            if live:
                raise RunBusy(f"{Path(workdir).resolve()}: Snakemake is running there (pid "
                              f"{', '.join(map(str, live))}) outside `villani run-lock`; wait for it to end")
            log.warning("removing the Snakemake lock left by an interrupted run (snakemake --unlock)")
            subprocess.run([*cmd, "--unlock"], cwd=workdir, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        piped = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                     env={**os.environ, "PYTHONUNBUFFERED": "1"}) if brief else {}
        proc = subprocess.Popen(list(cmd), cwd=workdir, pass_fds=(fd,), **piped)
        _write_holder(fd, f"pid {os.getpid()}, snakemake pid {proc.pid}")
        # Ctrl-C reaches Snakemake too (same process group), which stops its jobs cleanly;
        # the wrapper waits for it instead of dying first. SIGTERM is passed on.
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        old_term = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        try:
            if brief:
                _show_brief(proc.stdout)
            rc = proc.wait()
            return 128 - rc if rc < 0 else rc  # killed by signal N: 128 + N, as a shell reports it
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
    finally:
        os.close(fd)


def _show_brief(stream) -> None:
    """Copy what :class:`BriefOutput` keeps of ``stream`` to stderr, line by line, until it ends."""
    from villani.dag.run_output import BriefOutput

    brief = BriefOutput()
    for line in stream:
        shown = brief.line(line.rstrip("\n"))
        if shown is not None:
            sys.stderr.write(shown + "\n")
            sys.stderr.flush()


def _write_holder(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (text + "\n").encode(), 0)
