"""Progress of long jobs: timestamped log lines at least every N seconds, a live bar on a terminal.

A cluster job's output goes to a file (Snakemake's ``> {log} 2>&1``), where a tqdm bar
switches itself off. :class:`Progress` writes what a bar would show as ``logging`` lines
instead: one when the job starts and one when a phase begins, then one whenever
``interval`` seconds have passed without a line — from a background thread, so a line
comes even while a single step (one Hessian-vector product of a large model can take
minutes on a CPU) is still running — and one at the end. A line reads::

    2026-05-04 10:12:31 INFO villani.training.loop: train ptb adamw λ=0.001 seed=0 seg 0→1400 |
    step 612/1400 (44%) | 0.412 s/step | loss=4.183 lr=9.9e-05 tokens/s=1243 ‖θ‖²=2.31e+04 |
    elapsed 0:04:12 | ETA 0:05:25

Units are whatever the stage counts (training steps, Hessian-vector products, grid
points). The rate is the time from the current phase's start to its latest unit over the
units it has done (the units of one phase cost alike; before a phase's first unit, the
previous phase's rate); the ETA is the units left times that rate, less the time the unit
under way has already run. On a terminal (stderr is a TTY) a tqdm
bar is drawn as well and, while it is, tqdm's :func:`~tqdm.contrib.logging.logging_redirect_tqdm`
writes the console's log lines above it (``tqdm.write``: the bar is cleared and redrawn, never torn).

Configuration, once per process (the CLI): :func:`configure_logging` — the level of the
``villani`` loggers (``--log-level`` / ``VILLANI_LOG_LEVEL``, default INFO; other
libraries stay at WARNING) and the interval (``--progress-interval`` /
``VILLANI_PROGRESS_INTERVAL`` seconds, default 60). Neither changes any result, so
neither is a workflow parameter. Without it (library use, tests) INFO lines are not
shown and no thread is started.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from typing import Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

__all__ = ["Progress", "configure_logging", "progress_interval", "format_seconds", "running_trace",
           "running_top_eigenvalue", "DEFAULT_INTERVAL_S"]

DEFAULT_INTERVAL_S = 60.0
ENV_INTERVAL = "VILLANI_PROGRESS_INTERVAL"
ENV_LEVEL = "VILLANI_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_DATEFMT = "%Y-%m-%d %H:%M:%S"

_configured_interval: float | None = None


class _StderrHandler(logging.StreamHandler):
    """The one handler :func:`configure_logging` installs: stderr, flushed after every record
    (``StreamHandler`` does; a job log is read while the job runs). A plain console handler,
    so a :class:`Progress` bar's :func:`~tqdm.contrib.logging.logging_redirect_tqdm` finds it."""


def _parse_interval(value: Any, where: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{where}: {value!r} is not a number of seconds > 0")
    return seconds


def configure_logging(level: str | None = None, interval_s: float | str | None = None) -> None:
    """Send ``villani.*`` log records at ``level`` or above to stderr, timestamped; set the progress interval.

    ``level``: DEBUG, INFO, WARNING or ERROR (default ``$VILLANI_LOG_LEVEL``, else INFO).
    ``interval_s``: seconds between progress lines (default ``$VILLANI_PROGRESS_INTERVAL``,
    else 60). Other libraries' loggers stay at WARNING. Calling it again replaces the
    handler (one handler, never duplicated lines). A bad value is a one-line ValueError.
    """
    global _configured_interval
    name = level if level is not None else os.environ.get(ENV_LEVEL, "INFO")
    if str(name).upper() not in LEVELS:
        where = "--log-level" if level is not None else ENV_LEVEL
        raise ValueError(f"{where}: {name!r} is not a log level (allowed: {', '.join(LEVELS)})")
    if interval_s is not None:
        _configured_interval = _parse_interval(interval_s, "--progress-interval")
    elif os.environ.get(ENV_INTERVAL):
        _configured_interval = _parse_interval(os.environ[ENV_INTERVAL], ENV_INTERVAL)
    else:
        _configured_interval = None
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(h)
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt=_DATEFMT))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("villani").setLevel(str(name).upper())


def progress_interval() -> float:
    """Seconds between progress lines: as configured, else ``$VILLANI_PROGRESS_INTERVAL``, else 60."""
    if _configured_interval is not None:
        return _configured_interval
    env = os.environ.get(ENV_INTERVAL)
    return _parse_interval(env, ENV_INTERVAL) if env else DEFAULT_INTERVAL_S


def format_seconds(seconds: float | None) -> str:
    """``H:MM:SS`` (``?`` when unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class Progress:
    """Progress of one job, reported as log lines (and a bar on a terminal).

    Args:
        what: what runs, first field of every line (e.g. ``train ptb adamw λ=0.001 seed=0 seg 0→1400``).
        total: units of the whole job (``None``: unknown; no percentage or ETA).
        unit: name of a unit (``step``, ``HVP``, ``point``).
        done: units already done when the job starts (a resumed segment).
        logger: where lines go (default ``villani.runtime.progress``).
        interval_s: at most this many seconds between lines (default :func:`progress_interval`).
        bar: draw a tqdm bar (default: when stderr is a terminal).

    Use as a context manager; :meth:`phase` starts a named phase (a line at once),
    :meth:`update` advances the units and replaces shown values, ``close`` writes the last
    line. Thread-safe: the heartbeat thread only formats what the job last reported.
    """

    def __init__(self, what: str, total: int | None, *, unit: str = "step", done: int = 0,
                 logger: logging.Logger | None = None, interval_s: float | None = None, bar: bool | None = None):
        self.what, self.total, self.unit = what, total, unit
        self.log = logger or logging.getLogger("villani.runtime.progress")
        self.interval = float(interval_s) if interval_s is not None else progress_interval()
        self.done = int(done)
        self.phase_name: str | None = None
        self.status: dict[str, Any] = {}
        now = time.monotonic()
        self._start = self._phase_start = self._last_line = self._last_unit = now
        self._phase_done0 = self.done
        self._last_spu: float | None = None  # the previous phase's rate, until this phase's first unit
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        show_bar = sys.stderr.isatty() if bar is None else bar
        self._bar = tqdm(total=total, initial=self.done, desc=what, unit=unit, leave=False, disable=not show_bar,
                         file=sys.stderr)
        self._redirect = contextlib.ExitStack()  # console log lines through tqdm.write while the bar is drawn
        if show_bar:
            self._redirect.enter_context(logging_redirect_tqdm())
        self._thread = None
        self.log.info(self.line())
        if self.log.isEnabledFor(logging.INFO):
            self._thread = threading.Thread(target=self._heartbeat, name="villani-progress", daemon=True)
            self._thread.start()

    # ----------------------------------------------------------------- reporting
    def phase(self, name: str, total: int | None = None) -> None:
        """Begin phase ``name`` (its units count towards the job's; ``total`` replaces the job total if given)."""
        with self._lock:
            self.phase_name = name
            if total is not None:
                self.total = int(total)
                self._bar.total = self.total
            self.status = {}
            self._last_spu = self.seconds_per_unit() or self._last_spu
            self._phase_start = self._last_unit = time.monotonic()
            self._phase_done0 = self.done
            self._emit_locked()

    def update(self, done: int | None = None, *, advance: int = 0, **status: Any) -> None:
        """Set ``done`` (or add ``advance``) units and the values to show; a line if one is due."""
        with self._lock:
            before = self.done
            self.done = int(done) if done is not None else self.done + int(advance)
            self.status.update(status)
            if self.done != before:
                self._last_unit = time.monotonic()
                self._bar.update(self.done - before)
            if status:
                self._bar.set_postfix({k: _value(v) for k, v in status.items()}, refresh=False)
            if time.monotonic() - self._last_line >= self.interval:
                self._emit_locked()

    def counter(self, offset: int = 0, show=None):
        """A ``callback(done, total, running)`` for the curvature engine's estimators: the job
        has done ``offset + done`` units; ``show(done, total, running)`` gives the values to show."""

        def callback(done: int, total: int, running: Any) -> None:
            self.update(offset + int(done), **(show(done, total, running) if show is not None else {}))

        return callback

    def seconds_per_unit(self) -> float | None:
        """Seconds per unit in the current phase, from its start to its latest unit (before its
        first unit: the last phase's rate; else None)."""
        in_phase = self.done - self._phase_done0
        if in_phase > 0:
            return (self._last_unit - self._phase_start) / in_phase
        return self._last_spu

    def eta(self) -> float | None:
        """Seconds until ``total`` at the current phase's rate, less the time the unit under way
        has already run (None if unknown)."""
        spu = self.seconds_per_unit()
        if self.total is None or spu is None:
            return None
        return max(max(self.total - self.done, 0) * spu - (time.monotonic() - self._last_unit), 0.0)

    def line(self, label: str | None = None) -> str:
        """The current progress line (without timestamp); ``label`` replaces the phase name."""
        parts = [self.what]
        if label or self.phase_name:
            parts.append(label or self.phase_name)
        if self.total:
            parts.append(f"{self.unit} {self.done}/{self.total} ({100.0 * self.done / self.total:.0f}%)")
        else:
            parts.append(f"{self.unit} {self.done}")
        spu = self.seconds_per_unit()
        if spu is not None:
            parts.append(f"{spu:.3g} s/{self.unit}")
        if self.status:
            parts.append(" ".join(f"{k}={_value(v)}" for k, v in self.status.items()))
        parts.append(f"elapsed {format_seconds(time.monotonic() - self._start)}")
        if self.total and label is None:
            parts.append(f"ETA {format_seconds(self.eta())}")
        return " | ".join(parts)

    def _emit_locked(self) -> None:
        self._last_line = time.monotonic()
        self.log.info(self.line())

    def _heartbeat(self) -> None:
        while True:
            with self._lock:
                wait = self._last_line + self.interval - time.monotonic()
            if wait > 0:
                if self._stop.wait(wait):
                    return
                continue
            with self._lock:
                if self._closed:
                    return
                if time.monotonic() - self._last_line >= self.interval:
                    self._emit_locked()

    # ----------------------------------------------------------------- lifetime
    def close(self, message: str = "done") -> None:
        """Stop the heartbeat, close the bar, write the last line (labelled ``message``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._bar.close()
        self._redirect.close()
        self.log.info(self.line(message))

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close("done")
        else:
            self.close(f"stopped by {exc_type.__name__}")


def running_trace(done: int, total: int, samples) -> dict[str, Any]:
    """Values to show for a running Hutchinson estimate: probes, the mean of the samples so
    far and its t-based 95% CI (from two samples on)."""
    from villani.statistics.samples import t_interval

    shown: dict[str, Any] = {"probes": f"{done}/{total}", "trace": float(sum(samples) / len(samples))}
    ci = t_interval(samples)
    if ci is not None:
        shown["ci95"] = f"[{ci[0]:.4g}, {ci[1]:.4g}]"
    return shown


def running_top_eigenvalue(done: int, total: int, largest: float) -> dict[str, Any]:
    """Values to show for a running Lanczos run: steps and the largest Ritz value so far."""
    return {"steps": f"{done}/{total}", "ritz_max": largest}
