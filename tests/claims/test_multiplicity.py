"""The family-wise statement (villani.claims.reporting.multiplicity): a row's p-value is < α exactly when the
verdict rule decides it at level α (t intervals on their scale, Clopper–Pearson counts, per-unit
rows), Holm's adjusted p-values against a hand computation, and the family's error rate at a
region boundary by simulation."""

from __future__ import annotations

import numpy as np
import pytest

from villani.claims.reporting.multiplicity import decision_p, family, holm
from villani.claims.catalogue.verdict import INCONCLUSIVE, REFUTED, SUPPORTED, Region, verdict
from villani.statistics.intervals import correlation_interval, proportion_interval, run_proportion_interval, seed_interval

REGIONS = [Region.direction(+1), Region.direction(-1), Region.around(1.0, 0.25, relative=True), Region.at_least(0.5)]


@pytest.mark.parametrize("region", REGIONS, ids=lambda r: r.text)
def test_p_below_alpha_iff_the_rule_decides(region):
    rng = np.random.default_rng(abs(hash(region.text)) % 2**32)
    for _ in range(400):
        k = int(rng.integers(2, 6))
        iv = seed_interval(rng.normal(rng.normal(0.8, 1.0), rng.uniform(0.05, 1.0), k))
        p = decision_p(iv, region)
        decided = verdict(iv, region) in (SUPPORTED, REFUTED)
        assert (p < 0.05) == decided, (iv, p)


def test_p_of_a_correlation_is_on_fishers_z_scale():
    rng = np.random.default_rng(3)
    for _ in range(200):
        x = np.tile(np.arange(5.0), 3)
        y = rng.normal(0, 1) * x + rng.normal(0, 2, x.size)
        iv = correlation_interval(x, y, np.repeat([0, 1, 2], 5))
        if iv.low is None:
            continue
        assert (decision_p(iv, Region.direction(-1)) < 0.05) == (verdict(iv, Region.direction(-1)) != INCONCLUSIVE)


def test_p_of_a_count_matches_clopper_pearson():
    region = Region.at_least(0.95)
    for n in (3, 8, 20):
        for k in range(n + 1):
            iv = proportion_interval(k, n)
            assert (decision_p(iv, region) < 0.05) == (verdict(iv, region) in (SUPPORTED, REFUTED)), (k, n)


def test_p_of_a_fraction_of_runs_counts_runs_not_checkpoints():
    """A fraction of runs over 12 checkpoints each: the p-value is the binomial one over the runs (as
    its Clopper–Pearson interval is), so it is < α exactly when that interval decides."""
    region = Region.at_least(0.95)
    for n_runs in (2, 4, 8):
        for k in range(n_runs + 1):
            ok = np.repeat([True] * k + [False] * (n_runs - k), 12)
            ok[::12] = True  # every run holds at its first checkpoint: a run fails by its worst one
            iv = run_proportion_interval(ok, np.repeat(np.arange(n_runs), 12))
            assert iv.units == n_runs and iv.n == 12 * n_runs
            assert decision_p(iv, region) == pytest.approx(decision_p(proportion_interval(k, n_runs), region))
            assert (decision_p(iv, region) < 0.05) == (verdict(iv, region) in (SUPPORTED, REFUTED)), (k, n_runs)


def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → running max 0.02, 0.03, 0.06, 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_family_keeps_only_the_decisions_that_survive():
    rows = [{"id": "a", "verdict": REFUTED, "p_value": 0.001}, {"id": "b", "verdict": SUPPORTED, "p_value": 0.03},
            {"id": "c", "verdict": INCONCLUSIVE, "p_value": 0.4}, {"id": "d", "verdict": "untestable", "p_value": None}]
    out = family(rows, 0.05)
    assert [r["verdict_holm"] for r in rows] == [REFUTED, INCONCLUSIVE, INCONCLUSIVE, ""]
    assert out["rows"] == 3 and out["decided"] == 2 and out["survive"] == 1 and out["lost"] == ["b"]


def test_holm_controls_the_family_error_at_a_region_boundary():
    """30 rows whose true effect sits exactly on the boundary 0 of "> 0", 2–5 seeds each: per row the
    rule decides 5 % of the time, so some row of 30 is decided in ≈ 79 % of families; after Holm in
    ≤ 5 %."""
    rng = np.random.default_rng(7)
    any_raw, any_holm = 0, 0
    for _ in range(400):
        rows = []
        for i in range(30):
            iv = seed_interval(rng.normal(0.0, 1.0, int(rng.integers(2, 6))))
            rows.append({"id": str(i), "verdict": verdict(iv, Region.direction(+1)),
                         "p_value": decision_p(iv, Region.direction(+1))})
        any_raw += any(r["verdict"] != INCONCLUSIVE for r in rows)
        family(rows, 0.05)
        any_holm += any(r["verdict_holm"] not in (INCONCLUSIVE, "") for r in rows)
    assert any_raw / 400 > 0.7 and any_holm / 400 <= 0.05 + 0.03  # Monte Carlo sd 0.011
