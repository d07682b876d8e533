"""The learning-rate schedule against transformers': the constant mode is the library's
(bit for bit); the warm-up + cosine is ours — transformers' differs during the warm-up (and
past the end), which this test measures (the numbers in ``villani.training.optim.lr_factor``)."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import get_constant_schedule, get_cosine_schedule_with_warmup

from villani.plan.frozen import freeze
from villani.training.optim import lr_factor, make_scheduler


def _factors(sched_of, steps: int) -> list[float]:
    """The lr each of ``steps`` optimizer steps runs at (peak lr 1.0 unless ``sched_of`` sets
    another), as the scheduler ``sched_of(optimizer)`` gives it."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched, out = sched_of(opt), []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def _ours(warmup: int, total: int, constant: bool = False):
    return functools.partial(make_scheduler, train=freeze({"warmup_steps": warmup, "steps": total}), constant=constant)


def test_constant_mode_is_transformers_constant_schedule_bit_for_bit():
    """make_scheduler(constant=True) is get_constant_schedule; the lrs equal the hand-written
    LambdaLR(lambda s: 1.0) it replaced, bit for bit."""
    def at(lr, make):
        return lambda o: (o.param_groups[0].update(lr=lr), make(o))[1]

    for lr in (1.0, 3e-4, 0.1):
        ours = _factors(at(lr, _ours(0, 10, constant=True)), 500)
        old = _factors(at(lr, lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0)), 500)
        assert ours == old == _factors(at(lr, get_constant_schedule), 500) == [lr] * 500


@pytest.mark.parametrize("warmup,total", [(0, 1), (0, 100), (0, 5000), (10, 100), (100, 5000), (1, 2), (7, 7)])
def test_warmup_cosine_is_ours_and_where_transformers_differs(warmup, total):
    n = total + 3  # the T steps of a run, and three past its end
    ours = _factors(_ours(warmup, total), n)
    assert ours == [lr_factor(s, warmup, total) for s in range(n)]
    hf = _factors(lambda o: get_cosine_schedule_with_warmup(o, warmup, total), n)
    # the warm-up: transformers' starts at 0 and lags one step, each factor 1/w below ours
    assert [o - h for o, h in zip(ours[:warmup], hf[:warmup])] == pytest.approx([1 / max(warmup, 1)] * warmup)
    if total > warmup:
        assert ours[warmup:total + 1] == hf[warmup:total + 1]  # the cosine: bit for bit, down to 0 at T
        assert ours[total + 1:] == [0.0, 0.0] and hf[total + 1] > 0  # past T its cosine wraps
    else:  # T ≤ w: ours holds 1 after the warm-up, transformers' alternates 1, 0, 1
        assert ours[warmup:] == [1.0] * (n - warmup) and hf[warmup:] == [1.0, 0.0, 1.0][:n - warmup]
