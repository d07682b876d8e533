"""Graceful stop on SIGTERM and SIGUSR1: what a cluster sends before it kills a job.

SLURM sends SIGTERM at a job's time limit, on preemption and on ``scancel`` (SIGKILL
follows ``KillWait`` seconds later, 30 s by default), and again ``s`` seconds before the
limit when the job asked with ``sbatch --signal=TERM@<s>`` (``profiles/slurm``). SIGUSR1, a
common choice for that early warning, is honoured the same way when it reaches villani, but
the profile does not ask for it: it ends the job-side Snakemake at once (docs/slurm.md).
Either signal is a request to stop:

* ``villani train`` finishes the step it is in, writes its work state (atomically, as at
  every ``train.save_every``) and exits — a retry resumes at that very step, so a
  time-limit stop recomputes no step (:func:`deferred`, used by the training loop);
* every other command stops at once (:func:`raising`: the signal raises
  :class:`Stopped`, which unwinds like Ctrl-C); its outputs are written atomically, so
  none is left half-written.

Both end with one line on stderr and exit status :data:`EXIT_STOPPED` (75, ``EX_TEMPFAIL``:
"try again"), distinct from 0 (done), 2 (an error to fix) and 130 (Ctrl-C).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

EXIT_STOPPED = 75
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Stopped(BaseException):
    """A stop signal arrived; like KeyboardInterrupt, ``except Exception`` does not catch it.
    ``str()`` is the one line the CLI prints."""

    def __init__(self, signame: str, detail: str = "no partial output was written (earlier results are intact)"):
        super().__init__(f"stopped by {signame}; {detail}")
        self.signame = signame


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise(signum, frame) -> None:
    raise Stopped(signal.Signals(signum).name)


@contextmanager
def raising() -> Iterator[None]:
    """Within the block SIGTERM and SIGUSR1 raise :class:`Stopped` in the main thread (no-op
    elsewhere); the previous handlers come back afterwards."""
    if not _main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class StopFlag:
    """Set by a stop signal inside :func:`deferred`; ``signame`` is None until then."""

    signame: str | None = None

    def __bool__(self) -> bool:
        return self.signame is not None

    def stop(self, detail: str) -> Stopped:
        return Stopped(self.signame or "request", detail)


@contextmanager
def deferred() -> Iterator[StopFlag]:
    """Within the block a stop signal only sets the yielded flag; the caller checks it at a
    point where stopping loses nothing (a step boundary). The previous handlers come back
    afterwards. Outside the main thread signals cannot be caught: the flag stays unset."""
    flag = StopFlag()
    if not _main_thread():
        yield flag
        return

    def note(signum, frame) -> None:
        flag.signame = signal.Signals(signum).name

    previous = {sig: signal.signal(sig, note) for sig in STOP_SIGNALS}
    try:
        yield flag
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
