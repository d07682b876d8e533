r"""Time spans of work on a device without making the host wait for it.

On a GPU, a Hessian-vector product at the paper's 1 × 512 tokens is launch-bound (an H200
ran 34.5 ms of kernels in a 58 ms product at 125M, ``benchmarks/README.md``): every
``torch.cuda.synchronize`` or read-back of a value idles the device until the host has
queued the next kernels. :class:`DeviceTimer` therefore records a CUDA event at each end of
a span (no wait) and adds the spans up only when :attr:`DeviceTimer.seconds` is read — the
device time between the events, which for launch-bound work is the span's wall time as
well. On the CPU it is plain wall time (``time.perf_counter``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["DeviceTimer"]


class DeviceTimer:
    """The summed duration of the spans timed with :meth:`span` on ``device``."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._pending: list[tuple] = []  # (start, end) marks not yet added up
        self._seconds = 0.0

    def _mark(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))  # the device's stream, not cuda:0's
            return event
        return time.perf_counter()

    @contextmanager
    def span(self) -> Iterator[None]:
        """Time the enclosed work (kernels queued on the current stream, on CUDA)."""
        start = self._mark()
        try:
            yield
        finally:
            self._pending.append((start, self._mark()))

    @property
    def seconds(self) -> float:
        """Seconds of all spans so far; on CUDA reading it waits for the last span's kernels."""
        for start, end in self._pending:
            if self.cuda:
                end.synchronize()
                self._seconds += start.elapsed_time(end) / 1e3  # elapsed_time is in ms
            else:
                self._seconds += end - start
        self._pending.clear()
        return self._seconds
