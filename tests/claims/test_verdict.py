"""The verdict rule on constructed intervals, and the intervals it is given (bootstrap,
signed correlations, exact binomial)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from villani.claims.verdict import CODES, INCONCLUSIVE, REFUTED, SUPPORTED, Interval_, Region, verdict
from villani.stats import (
    bootstrap_interval,
    correlation_interval,
    mean_interval,
    pearson_r,
    proportion_interval,
    spearman_rho,
)


@pytest.mark.parametrize("interval, region, want", [
    # a value with a tolerance: the paper's R² ≈ 0.93 ± 0.05
    ((0.90, 0.96), Region.around(0.93, 0.05), SUPPORTED),      # inside
    ((0.20, 0.60), Region.around(0.93, 0.05), REFUTED),        # wholly below
    ((0.50, 0.95), Region.around(0.93, 0.05), INCONCLUSIVE),   # straddles the low end
    ((0.70, 1.20), Region.around(0.93, 0.05), INCONCLUSIVE),   # contains the region: too wide to say
    # a relative tolerance: 1.12 ± 10%
    ((1.05, 1.20), Region.around(1.12, 0.1, relative=True), SUPPORTED),
    ((1.25, 1.40), Region.around(1.12, 0.1, relative=True), REFUTED),
    # a direction: ρ < 0 claimed
    ((-0.9, -0.2), Region.direction(-1), SUPPORTED),
    ((0.3, 0.9), Region.direction(-1), REFUTED),
    ((-0.4, 0.3), Region.direction(-1), INCONCLUSIVE),
    ((0.0, 0.5), Region.direction(-1), REFUTED),               # 0 is outside the open half-line (−∞, 0)
    ((-0.5, 0.0), Region.direction(-1), INCONCLUSIVE),
    # thresholds: p > 0.3, error < 3%
    ((0.4, 0.9), Region.at_least(0.3, strict=True), SUPPORTED),
    ((0.01, 0.3), Region.at_least(0.3, strict=True), REFUTED),
    ((0.01, 0.02), Region.at_most(0.03, strict=True), SUPPORTED),
    ((0.02, 0.05), Region.at_most(0.03, strict=True), INCONCLUSIVE),
    # "at every checkpoint": the exact fraction
    ((1.0, 1.0), Region(1.0, 1.0), SUPPORTED),
    ((0.75, 0.75), Region(1.0, 1.0), REFUTED),
    ((0.75, 1.0), Region(1.0, 1.0), INCONCLUSIVE),
])
def test_verdict_rule(interval, region, want):
    assert verdict(Interval_(*interval), region) == want


def test_no_interval_is_inconclusive_and_codes():
    assert verdict(Interval_(None, None), Region.direction(+1)) == INCONCLUSIVE
    assert verdict(Interval_(0.1, math.nan), Region.direction(+1)) == INCONCLUSIVE
    with pytest.raises(ValueError):
        verdict(Interval_(1.0, 0.0), Region.direction(+1))
    assert CODES == {SUPPORTED: 1, INCONCLUSIVE: 0, REFUTED: -1}
    assert Region.around(0.93, 0.05).text == "0.93 ± 0.05" and Region.direction(-1).text == "< 0"


def test_bootstrap_interval_covers_the_mean_about_95_percent():
    rng = np.random.default_rng(1)
    hits = 0
    for k in range(200):
        x = rng.normal(2.0, 1.0, 40)
        iv = bootstrap_interval(lambda i: float(x[i].mean()), x.size, n_boot=300, seed=k)
        hits += iv.low <= 2.0 <= iv.high
    assert 0.88 <= hits / 200 <= 0.99  # percentile bootstrap, n = 40: slightly under 95%


def test_two_stage_bootstrap_is_wider_than_rows_when_runs_differ():
    rng = np.random.default_rng(0)
    runs = np.repeat(np.arange(4), 10)
    x = rng.normal(0, 0.1, 40) + np.array([0.0, 1.0, 2.0, 3.0])[runs]  # the runs differ, checkpoints agree
    flat = bootstrap_interval(lambda i: float(x[i].mean()), 40, n_boot=500)
    nested = bootstrap_interval(lambda i: float(x[i].mean()), 40, clusters=runs, n_boot=500)
    assert (nested.high - nested.low) > 2 * (flat.high - flat.low)  # ≈ 3.6 expected
    assert nested.units == 4 and flat.units == 40 and "two-stage" in nested.method
    # deterministic for a seed
    assert bootstrap_interval(lambda i: float(x[i].mean()), 40, clusters=runs, n_boot=500) == nested


def test_signed_correlations_and_their_intervals():
    x = np.arange(12.0)
    assert pearson_r(x, -2 * x) == pytest.approx(-1.0) and spearman_rho(x, x**3) == pytest.approx(1.0)
    assert pearson_r([1, 1, 1], [1, 2, 3]) is None
    rng = np.random.default_rng(3)
    y = -x + rng.normal(0, 1, 12)
    iv = correlation_interval(x, y, n_boot=500)
    assert iv.estimate < 0 and iv.high < 0
    assert verdict(iv, Region.direction(-1)) == SUPPORTED
    noise = correlation_interval(x, rng.normal(0, 1, 12), n_boot=500)
    assert noise.low < 0 < noise.high
    r2 = correlation_interval(x, y, kind="r2", n_boot=300)
    assert r2.estimate == pytest.approx(pearson_r(x, y) ** 2)


def test_mean_interval_carries_each_estimates_error():
    tight = mean_interval([1.0, 1.1, 0.9], [0.0, 0.0, 0.0], n_boot=500)
    loose = mean_interval([1.0, 1.1, 0.9], [1.0, 1.0, 1.0], n_boot=500)
    assert loose.high - loose.low > 5 * (tight.high - tight.low)
    mixed = mean_interval([-1.0, 1.0], None, n_boot=500, absolute=True)
    assert mixed.estimate == 1.0 and mixed.low == mixed.high == 1.0


def test_proportion_interval():
    iv = proportion_interval(3, 10)
    assert iv.estimate == 0.3 and 0.06 < iv.low < 0.07 and 0.65 < iv.high < 0.66
    assert proportion_interval(0, 0).estimate is None
    with pytest.raises(ValueError):
        proportion_interval(4, 3)
