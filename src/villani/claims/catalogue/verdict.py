r"""The verdict rule of the claims ledger (``docs/claims.md``), as a pure function.

A claim of the paper is turned into a *region* of values of one statistic — the paper's
number with a stated tolerance, a threshold ("p > 0.3"), or a direction (a signed
correlation > 0) — before any data is looked at. Our statistic comes with a confidence
interval [lo, hi]. Then

- **supported** when the whole interval lies inside the region,
- **refuted** when the whole interval lies outside it,
- **inconclusive** otherwise (the interval straddles a boundary of the region), and when
  the statistic or its interval cannot be computed on our data (the reason is given).

Two verdicts are not the rule's: **untestable** (this scale cannot decide the claim) and
**not a result of the paper** — a sentence of the paper that announces an experiment or a
capability the paper never reports (its text decides: no number, figure or table carries it),
so there is nothing to support or refute; the row quotes where the paper says so.

A direction is the open half-line (0, ∞) or (−∞, 0): a correlation whose interval
excludes 0 on the claimed side supports it, one that excludes 0 on the other side refutes
it. A point value without sampling error (one deterministic number) is the interval
[v, v].

>>> verdict(Interval_(0.2, 0.6), Region.direction(+1))
'supported'
>>> verdict(Interval_(-0.9, -0.1), Region.direction(+1))
'refuted'
>>> verdict(Interval_(-0.1, 0.4), Region.direction(+1))
'inconclusive'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["SUPPORTED", "REFUTED", "INCONCLUSIVE", "UNTESTABLE", "NOT_A_RESULT", "VERDICTS", "CODES", "Region",
           "verdict", "unit_verdict", "Interval_"]

SUPPORTED, REFUTED, INCONCLUSIVE = "supported", "refuted", "inconclusive"
#: A claim this scale cannot decide (a magnitude that does not transfer by λ·η·T, a second
#: dataset, a GPU): the row says what would test it.
UNTESTABLE = "untestable"
#: A sentence that announces what the paper never reports: nothing to test.
NOT_A_RESULT = "not a result of the paper"
#: Every verdict a row can have, in the order the report's tables print them.
VERDICTS = (SUPPORTED, REFUTED, INCONCLUSIVE, UNTESTABLE, NOT_A_RESULT)
#: Numeric codes for metrics.json (text verdicts live in claims.csv).
CODES = {SUPPORTED: 1, INCONCLUSIVE: 0, REFUTED: -1, UNTESTABLE: 0, NOT_A_RESULT: 0}


@dataclass(frozen=True)
class Interval_:
    """A bare interval (for the rule and its tests; the ledger passes :class:`villani.statistics.intervals.Interval`)."""

    low: float | None
    high: float | None


@dataclass(frozen=True)
class Region:
    """The values of a statistic a claim asserts: from ``low`` to ``high``, each end open or
    closed; ``text`` says it in words (``"≥ 0.3"``, ``"0.93 ± 0.05"``, ``"> 0"``)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    text: str = ""

    @classmethod
    def around(cls, value: float, tol: float, *, relative: bool = False) -> "Region":
        """[value − tol, value + tol] (``relative``: tol is a fraction of ``|value|``)."""
        half = abs(value) * tol if relative else tol
        txt = f"{value:g} ± {100 * tol:g}%" if relative else f"{value:g} ± {tol:g}"
        return cls(value - half, value + half, text=txt)

    @classmethod
    def direction(cls, sign: int) -> "Region":
        """(0, ∞) for sign > 0, (−∞, 0) for sign < 0."""
        if sign > 0:
            return cls(0.0, math.inf, low_open=True, text="> 0")
        if sign < 0:
            return cls(-math.inf, 0.0, high_open=True, text="< 0")
        raise ValueError("a direction needs sign +1 or -1")

    @classmethod
    def at_least(cls, value: float, *, strict: bool = False) -> "Region":
        return cls(value, math.inf, low_open=strict, text=f"{'>' if strict else '≥'} {value:g}")

    @classmethod
    def at_most(cls, value: float, *, strict: bool = False) -> "Region":
        return cls(-math.inf, value, high_open=strict, text=f"{'<' if strict else '≤'} {value:g}")

    def contains(self, x: float) -> bool:
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below


def verdict(interval, region: Region) -> str:
    """Supported / refuted / inconclusive for an interval (``.low``, ``.high``) and a region.

    The interval [lo, hi] is inside the region iff both ends are; outside iff it misses the
    region entirely: hi below the region's low end or lo above its high end (an open end
    belongs to the outside). An interval with a missing end is inconclusive.

    >>> r = Region.around(0.93, 0.05)
    >>> verdict(Interval_(0.90, 0.95), r), verdict(Interval_(0.2, 0.5), r), verdict(Interval_(0.5, 0.95), r)
    ('supported', 'refuted', 'inconclusive')
    """
    lo, hi = interval.low, interval.high
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"interval low {lo} > high {hi}")
    if region.contains(lo) and region.contains(hi):
        return SUPPORTED
    below = hi <= region.low if region.low_open else hi < region.low
    above = lo >= region.high if region.high_open else lo > region.high
    return REFUTED if below or above else INCONCLUSIVE


def unit_verdict(verdicts) -> str:
    """The verdict of a claim tested on several independent units (Fig 2's rays), from each
    unit's: **refuted** if any unit is refuted (its interval lies outside the region),
    **supported** only if every unit is supported, **inconclusive** otherwise. The units'
    intervals are Bonferroni-adjusted by the claim (confidence 1 − α/k each), so "any
    refuted" keeps the family's error at most α.

    >>> unit_verdict(["supported", "supported"]), unit_verdict(["supported", "refuted"])
    ('supported', 'refuted')
    >>> unit_verdict(["supported", "inconclusive"]), unit_verdict([])
    ('inconclusive', 'inconclusive')
    """
    vs = list(verdicts)
    if any(v == REFUTED for v in vs):
        return REFUTED
    if vs and all(v == SUPPORTED for v in vs):
        return SUPPORTED
    return INCONCLUSIVE
