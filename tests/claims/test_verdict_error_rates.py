"""The verdict rule's error rates where errors are likeliest: the true value on a region's boundary.

Per row: a statistic whose true value lies exactly on a boundary of the claim's region is
decided either way only by noise, so every decisive verdict there is a coin's toss. With a
95% interval the rule says **refuted** when the interval misses the region — α/2 = 0.025 of
the data sets for an exact interval — and **supported** when it lies inside — at most α/2 on
that side (≈ 0 when the interval is wider than the region). So at the boundary the decisive
rate is ≤ α = 0.05, ≤ α/2 each way (measured: refuted 0.023–0.030, supported 0.001–0.023).
Simulated at the ledger's designs with the shipped intervals and the shipped rule: the t
interval over 2–5 seeds (tolerance region, truth on its upper end), the log-scale interval
(relative tolerance, truth at +25%), a correlation pooled over 2 × 4 runs (direction, truth
0) and Clopper–Pearson over runs (≥ 0.95, truth 0.95; conservative, so fewer).

Over a family: the ledger has ≈ 30 measured rows. Were every truth on its boundary, the
expected number of decisive verdicts is Σ of the per-row rates ≈ 1.2 and the chance of at
least one ≈ 0.7 — which is why the report states a family-wise (Holm) reading next to the
per-row verdicts. At confidence 1 − α/30 per row (Bonferroni, Holm's first step) the chance of
any decisive verdict at the boundary falls to ≤ α.
"""

from __future__ import annotations

import numpy as np
import pytest

from villani.claims.catalogue.verdict import REFUTED, SUPPORTED, Region, verdict
from villani.statistics.intervals import correlation_interval, proportion_interval, seed_interval

N_SETS = 2000
ALPHA = 0.05
MC = 3 * np.sqrt(0.025 * 0.975 / N_SETS)  # 3 Monte Carlo SDs of a rate of 0.025
FAMILY = 30


def _rates(intervals, region) -> tuple[float, float]:
    """(fraction supported, fraction refuted) of the intervals under the rule."""
    v = [verdict(iv, region) for iv in intervals]
    return float(np.mean([x == SUPPORTED for x in v])), float(np.mean([x == REFUTED for x in v]))


def _design(name: str, confidence: float, rng) -> tuple[float, float]:
    """Supported and refuted rates of one design, truth on the region's boundary."""
    if name.startswith("t"):  # a per-seed mean, region 1 ± 0.25, truth 1.25
        seeds = int(name[1:])
        values = 1.25 + 0.2 * rng.standard_normal((N_SETS, seeds))
        return _rates([seed_interval(v, confidence) for v in values], Region.around(1.0, 0.25))
    if name.startswith("log"):  # a per-seed ratio, region 33.6 ± 25%, truth 33.6·1.25 (geometric mean)
        seeds = int(name[3:])
        values = 33.6 * 1.25 * np.exp(0.8 * rng.standard_normal((N_SETS, seeds)))
        return _rates([seed_interval(v, confidence, scale="log") for v in values], Region.around(33.6, 0.25,
                                                                                                  relative=True))
    if name == "corr":  # Pearson r within 2 runs × 4 checkpoints, region r > 0, truth 0
        x = np.tile(np.arange(4.0), 2)
        runs = np.repeat([0, 1], 4)
        y = rng.standard_normal((N_SETS, 8))
        return _rates([correlation_interval(x, yy, runs, confidence=confidence) for yy in y], Region.direction(+1))
    if name == "cp":  # a fraction of 8 runs, region ≥ 0.95, truth 0.95
        k = rng.binomial(8, 0.95, size=N_SETS)
        return _rates([proportion_interval(int(x), 8, confidence) for x in k], Region.at_least(0.95))
    raise ValueError(name)


#: The ≈ 30 measured rows of a ledger, by the design of their interval.
ROWS = {"t2": 10, "t3": 3, "t5": 3, "log2": 5, "log3": 2, "corr": 5, "cp": 2}


@pytest.fixture(scope="module")
def boundary_rates() -> dict[str, tuple[float, float]]:
    return {name: _design(name, 1 - ALPHA, np.random.default_rng(i)) for i, name in enumerate(ROWS)}


@pytest.mark.parametrize("name", ["t2", "t3", "t5", "log2", "log3", "corr"])
def test_at_a_boundary_each_decisive_verdict_has_rate_at_most_alpha_over_2(boundary_rates, name):
    """Refuted needs only the interval's near end past the boundary: rate α/2 for an exact
    interval. Supported needs the whole interval inside a tolerance region: at most α/2, and
    ≈ 0 where the interval is wider than the region (log-SD 0.8 over 2–3 seeds vs ± 25%)."""
    sup, ref = boundary_rates[name]
    msg = f"{name}: supported {sup:.4f}, refuted {ref:.4f} with the truth on the boundary"
    assert 0.025 - MC <= ref <= 0.025 + MC and sup <= 0.025 + MC, msg


def test_at_a_boundary_clopper_pearson_is_decisive_at_most_alpha_over_2_each_way(boundary_rates):
    sup, ref = boundary_rates["cp"]
    assert sup <= 0.025 + MC and ref <= 0.025 + MC, f"supported {sup:.4f}, refuted {ref:.4f}"


def test_over_a_family_of_30_rows_per_row_verdicts_expect_one_or_two_false_decisive(boundary_rates):
    """Every truth on its boundary, rows independent: the expected count of decisive verdicts
    and the chance of at least one, from the per-row rates."""
    assert sum(ROWS.values()) == FAMILY
    p = np.array([sum(boundary_rates[n]) for n, m in ROWS.items() for _ in range(m)])
    expected, any_ = float(p.sum()), float(1 - np.prod(1 - p))
    msg = f"expected decisive verdicts {expected:.2f}, P(at least one) {any_:.3f} over {FAMILY} rows"
    assert 1.0 <= expected <= 1.6 and 0.6 <= any_ <= 0.8, msg


def test_bonferroni_over_the_family_keeps_the_chance_of_any_decisive_verdict_below_alpha():
    """Holm's first step: each row at confidence 1 − α/30."""
    conf = 1 - ALPHA / FAMILY
    rates = {n: _design(n, conf, np.random.default_rng(100 + i)) for i, n in enumerate(ROWS)}
    p = np.array([sum(rates[n]) for n, m in ROWS.items() for _ in range(m)])
    any_ = float(1 - np.prod(1 - p))
    assert any_ <= ALPHA + 0.02, f"P(any decisive) {any_:.4f} at confidence {conf:.5f} per row; per row {rates}"
