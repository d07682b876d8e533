"""The per-step log of a training segment, growing while it trains, and optional TensorBoard events.

Rows (``LOG_FIELDS``: step, loss, lr, grad_norm, ‖θ‖², tokens/s, wall clock, skipped) are
appended to ``work/seg{end}.csv`` and flushed as soon as they reach the host — every step on
the CPU, in bunches of at most 32 steps or 1 s on CUDA (:mod:`villani.training.step`) — so
the file can be read (``tail -f``) while the segment runs. It lives in the run's ``work/`` folder beside the
work state, outside the declared outputs, because Snakemake deletes a failed job's
declared outputs before rerunning it; at the end of the segment it is copied atomically to
the declared ``logs/seg{end}.csv``.

**Crash safety.** At every work-state save the file is fsync'ed *first* and its size in
bytes and rows go into the work state (:meth:`StepLog.sync`); the work state is then
written atomically. A work state therefore never claims more rows than are on disk. A
segment killed at any point and rerun restores the work state at step k and truncates
the file to the byte size recorded with it (:meth:`StepLog.open`): exactly the rows
1..k (of this segment) remain, steps k+1.. are trained again and appended — no
duplicated, no missing step, and the rows of the deterministic columns are the same bytes
as an uninterrupted run's (tokens/s and wall clock are timings). If the file is shorter
than the work state says, the work state is not used and the segment restarts from its
first checkpoint (then the file restarts from its header).

**TensorBoard** (``train.tensorboard: true``; ``pip install 'villani[tensorboard]'``): the
same values as scalars ``train/<field>`` at global step, in ``tensorboard/`` of the run
folder (not a declared output; changing the key never reruns training). Each segment
opens a writer with ``purge_step`` = its first step + 1, so TensorBoard discards events a
killed attempt wrote beyond the state the rerun resumed from.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Mapping

from villani.io import atomic, tables

__all__ = ["LOG_FIELDS", "StepLog", "format_rows", "tensorboard_writer", "write_scalars"]

LOG_FIELDS = tables.columns("step_log")  # the columns of villani/schemas/step_log.table.yaml
TENSORBOARD_FIELDS = ("loss", "lr", "grad_norm", "theta_sq_norm", "tokens_per_s")


def format_rows(rows: list[Mapping], header: bool = False) -> str:
    """CSV text of ``rows`` (columns ``LOG_FIELDS``; floats as Python's repr), with the header if asked."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_FIELDS)
    if header:
        w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in LOG_FIELDS})
    return buf.getvalue()


class StepLog:
    """Append-only CSV at ``partial`` (the growing file), published to ``final`` at the segment end."""

    def __init__(self, partial: Path, final: Path):
        self.partial, self.final = Path(partial), Path(final)
        self.rows = 0
        self._f = None

    def size_on_disk(self) -> int:
        """Bytes of the growing file (0 when it does not exist)."""
        return self.partial.stat().st_size if self.partial.exists() else 0

    def open(self, resume_bytes: int | None = None, resume_rows: int = 0) -> None:
        """Start the file (header only), or keep its first ``resume_bytes`` bytes (``resume_rows`` rows) and continue."""
        self.partial.parent.mkdir(parents=True, exist_ok=True)
        if resume_bytes is None:
            self._f = open(self.partial, "w", newline="", encoding="utf-8")
            self._f.write(format_rows([], header=True))
            self.rows = 0
        else:
            self._f = open(self.partial, "r+", newline="", encoding="utf-8")
            self._f.truncate(int(resume_bytes))
            self._f.seek(int(resume_bytes))
            self.rows = int(resume_rows)
        self._f.flush()

    def append(self, row: Mapping) -> None:
        """Append one row and flush it to the OS (readable at once; durable at the next :meth:`sync`)."""
        self._f.write(format_rows([row]))
        self._f.flush()
        self.rows += 1

    def sync(self) -> dict:
        """fsync the file; return ``{"log_bytes", "log_rows"}`` for the work state."""
        self._f.flush()
        os.fsync(self._f.fileno())
        return {"log_bytes": self._f.tell(), "log_rows": self.rows}

    def publish(self) -> Path:
        """Close the file and copy it atomically to ``final``; remove the growing file."""
        self.close()
        atomic.write_bytes(self.final, self.partial.read_bytes())
        self.partial.unlink()
        return self.final

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def tensorboard_writer(log_dir: Path, first_step: int):
    """A ``SummaryWriter`` in ``log_dir`` that makes TensorBoard drop events at steps > ``first_step``
    written before (a killed attempt's); a one-line ValueError when the package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ValueError("train.tensorboard: true needs the tensorboard package "
                         "(pip install 'villani[tensorboard]'), or set train.tensorboard: false") from None
    return SummaryWriter(log_dir=str(log_dir), purge_step=int(first_step) + 1)


def write_scalars(writer, row: Mapping) -> None:
    """One row as scalars ``train/<field>`` at its step (non-finite values are skipped)."""
    for k in TENSORBOARD_FIELDS:
        v = float(row[k])
        if math.isfinite(v):
            writer.add_scalar(f"train/{k}", v, int(row["step"]))
