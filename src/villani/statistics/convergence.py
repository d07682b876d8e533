r"""Time to a target: how fast a run's curve comes down — the one home of every "convergence
speed" of the claims ledger, the figures and the efficiency table.

- :func:`moving_average` — the centred moving average a per-step training loss is read
  through, over :func:`loss_window` = max(1, ⌊T/40⌋) steps of a T-step run;
- :func:`first_reach` — the first step at which a curve is at or below a level: the time to
  that target (``None``: never reached);
- :func:`drop_level` — the level a fraction f of the way down from a start to a floor,
  :math:`\ell = y_0 - f\,(y_0 - y_{\min})`;
- :func:`run_times` — per run, the steps to a **common** target and to its **own** floor;
  :func:`seed_times` the same for the λ of each seed (a target common to the runs a seed pairs),
  on curves smoothed over a window — what Fig 5's speed rows and figure read.

For runs r with curves :math:`y_r(t)`, starts :math:`y_r(0)` and lowest values
:math:`m_r = \min_t y_r(t)`, the common target is one level for every run,

.. math:: \ell^* = \max_r y_r(0) - f\,\bigl(\max_r y_r(0) - \max_r m_r\bigr),

f of the way from the highest start to the highest of the runs' floors, so that every run
reaches it (:math:`m_r \le \max_r m_r < \ell^*`); the run's time to it is
:math:`t^*_r = \min\{t : y_r(t) \le \ell^*\}`. Its time to its own floor is
:math:`t^{(f)}_r = \min\{t : y_r(t) \le y_r(0) - f\,(y_r(0) - m_r)\}` (t₉₀ at f = 0.9).

The two disagree where the floors differ: a run that plateaus higher (an over-regularised
one) makes f of *its own* drop sooner while it reaches the level every run reaches later.
"Convergence accelerates" compares curves on one axis — the common target; t₉₀ to the own
floor measures how soon a run stops improving, whatever it stops at.

>>> t = run_times({"a": ([0, 1, 2, 3], [4.0, 2.0, 1.5, 1.0]), "b": ([0, 1, 2, 3], [4.0, 3.0, 2.0, 2.0])})
>>> round(t.target, 9), [(t.runs[k].to_common, t.runs[k].to_own) for k in "ab"]    # a first to ℓ*, b to its own
(2.2, [(1.0, 3.0), (2.0, 2.0)])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping

import numpy as np

__all__ = ["T90", "loss_window", "moving_average", "first_reach", "drop_level", "RunTimes", "Times", "run_times",
           "seed_times"]

#: The fraction of the drop that t₉₀ and the common target stand at.
T90 = 0.9


def loss_window(steps: int) -> int:
    """The moving-average window of a per-step training loss: max(1, ⌊T/40⌋) steps."""
    return max(1, int(steps) // 40)


def moving_average(values: Any, window: int) -> np.ndarray:
    """The centred moving average over ``window`` points (``window // 2`` before, the rest after;
    fewer at the ends) — pandas' ``rolling(window, center=True, min_periods=1).mean()``.

    >>> moving_average([1.0, 2.0, 3.0, 4.0], 2).tolist()
    [1.0, 1.5, 2.5, 3.5]
    """
    y = np.asarray(values, dtype=float)
    w = int(window)
    if w < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    c = np.concatenate([[0.0], np.cumsum(y)])
    i = np.arange(y.size)
    lo, hi = np.maximum(i - w // 2, 0), np.minimum(i + (w - 1) // 2 + 1, y.size)
    return (c[hi] - c[lo]) / (hi - lo)


def first_reach(steps: Any, values: Any, target: float) -> float | None:
    """The first step at which ``values`` ≤ ``target`` (steps in increasing order); ``None`` if never.

    >>> first_reach([0, 10, 20], [5.0, 3.0, 1.0], 3.0), first_reach([0, 10], [5.0, 4.0], 3.0)
    (10.0, None)
    """
    s, y = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    hit = np.flatnonzero(y <= float(target))
    return float(s[hit[0]]) if hit.size else None


def drop_level(start: float, floor: float, fraction: float = T90) -> float:
    """start − fraction·(start − floor): the level ``fraction`` of the way down to ``floor``."""
    return float(start) - float(fraction) * (float(start) - float(floor))


@dataclass(frozen=True)
class RunTimes:
    """One run's start, lowest value, steps to the common target and to f of its own drop."""

    start: float
    lowest: float
    to_common: float | None
    to_own: float | None


@dataclass(frozen=True)
class Times:
    """The common target (``None`` when the highest floor is not below the highest start) and each run's times."""

    target: float | None
    runs: dict[Hashable, RunTimes]


def run_times(curves: Mapping[Hashable, tuple[Any, Any]], fraction: float = T90) -> Times:
    """:class:`Times` of ``curves`` ({run: (steps, values)}, steps increasing; module docstring)."""
    parts = {k: (np.asarray(s, dtype=float), np.asarray(y, dtype=float)) for k, (s, y) in curves.items()}
    parts = {k: (s, y) for k, (s, y) in parts.items() if y.size}
    if not parts:
        return Times(None, {})
    high_start = max(float(y[0]) for _, y in parts.values())
    high_floor = max(float(y.min()) for _, y in parts.values())
    target = drop_level(high_start, high_floor, fraction) if high_floor < high_start else None
    out = {}
    for k, (s, y) in parts.items():
        own = float(y[0]) - float(y.min())
        out[k] = RunTimes(float(y[0]), float(y.min()), None if target is None else first_reach(s, y, target),
                          first_reach(s, y, drop_level(y[0], y.min(), fraction)) if own > 0 else None)
    return Times(target, out)


def seed_times(curves: Mapping[tuple[float, int], tuple[Any, Any]], window: int, fraction: float = T90) -> list[dict]:
    """One dict per run (λ, seed) of ``curves`` ({(λ, seed): (steps, values)}): ``lam``, ``seed``, the
    seed's common ``target`` and the run's :class:`RunTimes` fields — :func:`run_times` over the λ of
    each seed, on the values smoothed by :func:`moving_average` over ``window`` points."""
    out = []
    for seed in sorted({k[1] for k in curves}):
        got = run_times({k: (s, moving_average(y, window)) for k, (s, y) in curves.items() if k[1] == seed}, fraction)
        out += [{"lam": lam, "seed": seed, "target": got.target, **vars(t)} for (lam, _), t in got.runs.items()]
    return out
