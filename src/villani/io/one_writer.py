"""One writer per output: a lock file held while a process writes a run's files.

``villani train`` holds its run's training lock (``work/train.lock``: checkpoints,
segment manifests, step logs, work state) and ``villani measure`` one lock per measured
checkpoint (``work/measure{step}.lock``), for as long as they write. A second process
that asks for a held lock is refused at once (:class:`WriterBusy`), in one line naming the
holder — its pid and command line, and what it writes — instead of both writing the same
files (a damaged step log, a vanished work state).

The lock is filelock's :func:`~filelock.lock_descriptor` (``fcntl.flock`` on Unix) on a
descriptor this module owns, so the holder's description can be written into the lock file
itself; the kernel drops the lock when the holder exits, however it dies (SIGKILL
included), so a lock is never stale: the next writer takes it and overwrites the
description. Within one process a lock is re-entrant (``villani train --all`` holds the
run's lock across its segments and each segment takes it again).

:func:`holder` tells a reader who holds a lock, without taking it (``measure`` refuses a
checkpoint a live ``train`` is rewriting).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator, Mapping

from filelock import lock_descriptor, unlock_descriptor

__all__ = ["WriterBusy", "one_writer", "holder", "describe"]

_HELD: dict[str, list[int]] = {}  # lock path → [descriptor, depth] of the locks this process holds


class WriterBusy(ValueError):
    """Another live process holds the lock; ``str(err)`` is one line naming it."""


def _command() -> str:
    argv = list(sys.argv) or ["python"]
    argv[0] = Path(argv[0]).name
    return shlex.join(argv)[:300]


def describe(info: Mapping | None) -> str:
    """``pid 123: villani train … (writes checkpoints 13–24)`` of a holder's record."""
    if not info:
        return "a process that has not yet written its name"
    writes = f" (writes {info['writes']})" if info.get("writes") else ""
    return f"pid {info.get('pid', '?')}: {info.get('command', '?')}{writes}"


def _read(fd: int) -> dict | None:
    try:
        data = os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
        info = json.loads(data) if data.strip() else None
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _open(lock: Path) -> int:
    lock.parent.mkdir(parents=True, exist_ok=True)
    return os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)


@contextlib.contextmanager
def one_writer(lock: str | Path, what: str, writes: str = "", steps: tuple[int, int] | None = None
               ) -> Iterator[None]:
    """Hold ``lock`` while the block runs; :class:`WriterBusy` when a live process holds it
    (``what``: the files it guards, for the message; ``writes``: what this process writes,
    and ``steps`` the checkpoint steps (first, last) it rewrites, recorded for the next
    process's message and for :func:`holder`)."""
    lock = Path(lock)
    key = str(lock.absolute())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    fd = _open(lock)
    try:
        if not lock_descriptor(fd, blocking=False):
            raise WriterBusy(f"{lock}: {what} is being written by another process ({describe(_read(fd))}); "
                             "wait for it to end or stop it, then run again")
        info = {"pid": os.getpid(), "command": _command(), "writes": writes,
                "steps": None if steps is None else [int(steps[0]), int(steps[1])]}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _HELD[key] = [fd, 1]
        try:
            yield
        finally:
            del _HELD[key]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            unlock_descriptor(fd)
    finally:
        os.close(fd)


def holder(lock: str | Path) -> dict | None:
    """The record of the live process holding ``lock`` (``pid``, ``command``, ``writes``,
    and ``steps`` where the holder recorded them), or None when no other process holds it."""
    lock = Path(lock)
    if str(lock.absolute()) in _HELD or not lock.exists():
        return None
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None
    try:
        if lock_descriptor(fd, blocking=False):
            unlock_descriptor(fd)
            return None
        return _read(fd) or {}
    finally:
        os.close(fd)
