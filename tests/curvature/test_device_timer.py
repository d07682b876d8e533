"""DeviceTimer: spans summed on the CPU by wall time, on CUDA by events read lazily."""

import time

import pytest
import torch

from villani.curvature.operators.device_timer import DeviceTimer


def test_spans_add_up_and_reading_twice_does_not_count_twice():
    timer = DeviceTimer("cpu")
    assert timer.seconds == 0.0
    for _ in range(2):
        with timer.span():
            time.sleep(0.05)
    first = timer.seconds
    assert 0.1 <= first < 1.0
    assert timer.seconds == first  # read again: nothing added
    with timer.span():
        pass
    assert first <= timer.seconds < first + 0.05


def test_a_span_that_raises_is_still_counted():
    timer = DeviceTimer("cpu")
    with pytest.raises(RuntimeError), timer.span():
        time.sleep(0.02)
        raise RuntimeError("boom")
    assert timer.seconds >= 0.02


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_spans_time_the_kernels_without_waiting():
    timer = DeviceTimer("cuda")
    a = torch.randn(4096, 4096, device="cuda")
    with timer.span():
        for _ in range(20):
            a = a @ a / 64
    assert len(timer._pending) == 1  # recorded, not yet read: the host did not wait
    assert timer.seconds > 0 and not timer._pending
