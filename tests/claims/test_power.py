"""The power plan (villani.claims.power): seeds to decide and seeds for 80 % power, checked by
simulating experiments at the computed number of seeds with the shipped interval
(villani.stats.seed_interval); the interval's own scale read from its method; the treatment
between the λ extremes of a row's runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from villani.claims.power import NEVER, plan, seeds_for_power, seeds_to_decide, t_scale, treatment
from villani.claims.verdict import Region
from villani.stats import Interval, correlation_interval, seed_interval

N_SIM = 4000  # Monte Carlo sd of a fraction near 0.5: 0.008


def _clears(rng, n, delta, sd):
    """Fraction of simulated experiments of n normal units (mean δ, SD sd) whose 95 % t interval
    lies above the boundary 0."""
    v = delta + sd * rng.standard_normal((N_SIM, n))
    return float(np.mean([seed_interval(x).low > 0 for x in v]))


@pytest.mark.parametrize("delta,sd", [(0.5, 1.0), (2.0, 1.0), (0.1, 0.3)])
def test_at_the_computed_seeds_the_interval_clears_as_often_as_intended(delta, sd):
    rng = np.random.default_rng(int(delta * 100 + sd * 10))
    n = seeds_to_decide(delta, sd)
    t = stats.t.ppf(0.975, n - 1)
    assert t * sd / np.sqrt(n) < delta <= stats.t.ppf(0.975, n - 2) * sd / np.sqrt(n - 1) or n == 2
    # the observed effect's interval just clears at n: a new experiment there decides at least about half
    # the time (more where the whole number n overshoots the threshold: 0.75 at δ = 2·sd, n = 3)
    expect = stats.nct.sf(t, n - 1, delta * np.sqrt(n) / sd)
    assert expect >= 0.45
    assert _clears(rng, n, delta, sd) == pytest.approx(expect, abs=0.03)
    n80 = seeds_for_power(delta, sd)
    assert n80 >= n
    assert _clears(rng, n80, delta, sd) >= 0.8 - 0.03
    if n80 > 2:
        assert _clears(rng, n80 - 1, delta, sd) < 0.8 + 0.03


def test_an_effect_on_the_boundary_is_never_decided():
    assert seeds_to_decide(0.0, 1.0) == NEVER and seeds_for_power(0.0, 1.0) == NEVER
    assert str(seeds_to_decide(1e-9, 1.0)).startswith(">")


def test_the_plan_reads_the_intervals_scale():
    raw = seed_interval([0.1, 0.3, 0.25])
    sc = t_scale(raw)
    assert sc.name == "raw" and sc.sd == pytest.approx(np.std([0.1, 0.3, 0.25], ddof=1))
    p = plan(raw, Region.direction(+1))
    assert p["seeds_to_decide"] == 4 and p["seeds_80pct"] >= 4
    # a correlation over runs: Fisher z, the boundary r = 0 at z = 0
    x = np.tile(np.arange(6.0), 3)
    y = x + np.random.default_rng(1).normal(0, 2, x.size)
    r = correlation_interval(x, y, np.repeat([0, 1, 2], 6))
    sc = t_scale(r)
    assert sc.name == "Fisher z" and sc.centre == pytest.approx(np.arctanh(r.estimate))
    # a t interval of logs, back-transformed (a positive ratio): the log scale, its boundaries mapped by ln
    logs = seed_interval(np.log([170.0, 39.8, 46.2]))
    back = Interval(*(float(np.exp(v)) for v in (logs.estimate, logs.low, logs.high)), 0.95, 3, 3, 2,
                    "t interval of ln values over 3 seeds (df = 2), back-transformed: the geometric mean")
    sc = t_scale(back)
    assert sc.name == "log" and sc.centre == pytest.approx(logs.estimate) and sc.sd == pytest.approx(
        np.std(np.log([170.0, 39.8, 46.2]), ddof=1))
    # exact numbers, counts and no interval give no plan
    for iv in (Interval(1.0, 1.0, 1.0, 1.0, 1, 1, None, "exact: x"), Interval(0.5, 0.1, 0.9, 0.95, 4, 4, None,
                                                                              "Clopper–Pearson (exact binomial)")):
        assert t_scale(iv) is None and plan(iv, Region.at_least(0.95))["seeds_to_decide"] == ""


def test_treatment_between_the_lambda_extremes():
    rows = []
    for lam, theta, ppl in ((0.0, 100.0, 50.0), (0.1, 95.0, 51.0)):
        for seed, shift in ((0, 0.0), (1, 40.0)):
            for step in (0, 10):
                rows.append({"variant": "adamw", "lam": lam, "seed": seed, "step": step, "theta_sq_norm": theta,
                             "val_ppl": ppl + shift, "run_learned": True})
    m = pd.DataFrame(rows)
    t = treatment(m, "adamw", [0.1])  # one λ > 0: against λ = 0
    assert t["delta_theta_sq_rel"] == pytest.approx(-0.05) and t["delta_val_ppl"] == pytest.approx(1.0)
    assert t["seed_sd_val_ppl"] == pytest.approx(40 / np.sqrt(2)) and t["lambda_visible"] is False
    assert treatment(m, "adamw", [0.0]) == {}
