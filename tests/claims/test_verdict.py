"""The verdict rule on constructed intervals, per unit, and the intervals it is given (signed
correlations pooled over runs, exact binomial); their coverage: test_coverage.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from villani.claims.catalogue.verdict import (
    CODES,
    INCONCLUSIVE,
    NOT_A_RESULT,
    REFUTED,
    SUPPORTED,
    UNTESTABLE,
    Interval_,
    Region,
    unit_verdict,
    verdict,
)
from villani.statistics.intervals import correlation_interval, pearson_r, proportion_interval, spearman_rho


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
    assert CODES == {SUPPORTED: 1, INCONCLUSIVE: 0, REFUTED: -1, UNTESTABLE: 0, NOT_A_RESULT: 0}
    assert Region.around(0.93, 0.05).text == "0.93 ± 0.05" and Region.direction(-1).text == "< 0"


def test_unit_verdict_every_unit_supports_any_refutes():
    assert unit_verdict([SUPPORTED] * 3) == SUPPORTED
    assert unit_verdict([SUPPORTED, REFUTED, SUPPORTED]) == REFUTED
    assert unit_verdict([SUPPORTED, INCONCLUSIVE]) == INCONCLUSIVE and unit_verdict([]) == INCONCLUSIVE


def test_signed_correlations():
    x = np.arange(10.0)
    assert pearson_r(x, -2 * x) == pytest.approx(-1.0) and spearman_rho(x, x**3) == pytest.approx(1.0)
    assert pearson_r([1, 1, 1], [1, 2, 3]) is None


def test_correlation_interval_pools_runs_on_the_fisher_z_scale():
    rng = np.random.default_rng(0)
    x = np.tile(np.arange(12.0), 3)
    runs = np.repeat([0, 1, 2], 12)
    y = -x + rng.normal(0, 2, x.size)
    iv = correlation_interval(x, y, runs)
    assert iv.high < 0 and iv.units == 3 and iv.dof == 2 and "Fisher z" in iv.method
    r = [pearson_r(x[runs == k], y[runs == k]) for k in range(3)]
    assert iv.estimate == pytest.approx(math.tanh(np.mean(np.arctanh(r))))
    noise = correlation_interval(x, rng.normal(0, 1, x.size), runs)
    assert noise.low < 0 < noise.high
    r2 = correlation_interval(x, y, runs, kind="r2")
    assert r2.estimate == pytest.approx(iv.estimate**2) and r2.low == pytest.approx(iv.high**2)


def test_proportion_interval():
    iv = proportion_interval(3, 10)
    assert iv.estimate == 0.3 and 0.06 < iv.low < 0.07 and 0.65 < iv.high < 0.66  # Clopper–Pearson
    assert proportion_interval(0, 0).estimate is None
    with pytest.raises(ValueError):
        proportion_interval(4, 3)
