"""The power plan (villani.claims.reporting.power), planned from the claim's region and not from the
estimate: the minimal effect of interest read from the region, and the seeds to decide checked
by simulating experiments at our designs — the SD of a row of the default ledger (params.yaml,
f27a41d) on its interval's scale, its region, the ledger's own interval and verdict rule — with
the truth one minimal effect from the boundary on each side (and at a two-ended region's
centre): at the planned n each decides with probability ≥ 0.8, at n − 1 one of them does not;
the interval's own scale read from its method; the treatment between the λ extremes of a row's
runs, paired by seed."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from villani.claims.reporting.power import (MIN_CORRELATION, POWER, min_effect, p_inside, p_outside, plan, seeds_to_decide,
                                  t_scale, treatment)
from villani.claims.catalogue.verdict import REFUTED, SUPPORTED, Interval_, Region, verdict
from villani.statistics.intervals import Interval, correlation_interval, seed_interval

N_SIM = 4000  # Monte Carlo sd of a fraction near 0.8: 0.006


def _interval(k: int, centre: float, sd: float, scale: str) -> Interval:
    """An interval of the form the ledger writes, on ``scale``, over k units (only its method, units
    and ends are read by the plan)."""
    half = stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k)
    lo, hi = centre - half, centre + half
    back = {"raw": (lambda v: v, "t interval over %d seeds (df = %d), one value per seed"),
            "log": (math.exp, "t interval of ln values over %d seeds (df = %d), back-transformed: the geometric mean"),
            "z": (math.tanh, "pooled Pearson r over all points, run jackknife on Fisher z (t, df = %d%s), "
                             "back-transformed"),
            "r2": (lambda v: math.tanh(v) ** 2, "pooled Pearson r over all points, run jackknife on Fisher z "
                                                "(t, df = %d%s), back-transformed, squared")}
    f, method = back[scale]
    text = method % ((k, k - 1) if scale in ("raw", "log") else (k - 1, ""))
    return Interval(f(centre), f(lo), f(hi), 0.95, k, k, k - 1, text)


def _decided(rng, n: int, truth: float, sd: float, scale: str, region: Region) -> dict[str, float]:
    """Fractions of N_SIM experiments of n normal units (on the scale) whose interval — the shipped
    seed interval, back-transformed as the ledger does — is supported / refuted by ``region``."""
    v = truth + sd * rng.standard_normal((N_SIM, n))
    first = seed_interval(v[0])
    m, s = v.mean(axis=1), v.std(axis=1, ddof=1)
    half = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    lo, hi = m - half, m + half
    assert (first.low, first.high) == pytest.approx((lo[0], hi[0]))  # the ledger's interval, vectorised
    if scale == "r2":  # the r interval squared: [0, max(lo², hi²)] when it straddles 0
        rl, rh = np.tanh(lo), np.tanh(hi)
        lo, hi = np.where(rl > 0, rl ** 2, 0.0), np.where(rl > 0, rh ** 2, np.maximum(rl ** 2, rh ** 2))
    elif scale != "raw":
        lo, hi = (np.exp(lo), np.exp(hi)) if scale == "log" else (np.tanh(lo), np.tanh(hi))
    got = [verdict(Interval_(a, b), region) for a, b in zip(lo, hi)]
    return {x: got.count(x) / N_SIM for x in (SUPPORTED, REFUTED)}


#: (row of the default ledger, its region, its scale, its between-seed SD there)
DESIGNS = [
    ("fig7_direction_adamw_lam0", Region.direction(-1), "z", 0.377),
    ("fig7_direction_adamw_lam0p012", Region.direction(-1), "z", 0.249),
    ("fig4_bulk_bounded", Region.at_most(0.1), "log", 0.799),
    ("fig3_valley_at_zero", Region.at_most(0.8, strict=True), "raw", 0.032),
    ("fig7_r2_strong", Region.around(0.94, 0.05), "r2", 0.093),
    ("fig8_var_scales_lam2_theta2 at 40× its SD", Region.around(1.0, 0.2), "raw", 0.207),
]


def _truths(region: Region, scale: str, delta: float, inside) -> list[tuple[float, str]]:
    """Where the truth sits on the scale, and the verdict that decides there."""
    to = {"raw": float, "log": math.log, "z": math.atanh, "r2": lambda v: math.atanh(math.sqrt(v))}[scale]
    ends = [to(v) for v in (region.low, region.high) if math.isfinite(v)]
    if inside:
        centre = to((region.low + region.high) / 2)
        return [(centre, SUPPORTED), (ends[0] - delta, REFUTED), (ends[1] + delta, REFUTED)]
    inside_sign = 1 if math.isinf(region.high) else -1
    return [(ends[0] + inside_sign * delta, SUPPORTED), (ends[0] - inside_sign * delta, REFUTED)]


@pytest.mark.parametrize("row,region,scale,sd", DESIGNS, ids=[d[0] for d in DESIGNS])
def test_at_the_planned_seeds_a_truth_one_minimal_effect_away_is_decided_at_the_stated_rate(row, region, scale, sd):
    rng = np.random.default_rng(zlib.crc32(row.encode()))
    pl = plan(_interval(4, 0.0 if scale != "r2" else 2.0, sd, scale), region)
    n, delta = pl["seeds_to_decide"], pl["min_effect"]
    assert isinstance(n, int) and n >= 2 and pl["seed_sd"] == pytest.approx(sd), pl
    _, inside, _ = min_effect(region, t_scale(_interval(4, 0.0 if scale != "r2" else 2.0, sd, scale)))
    truths = _truths(region, scale, delta, inside)
    rates = [_decided(rng, n, t, sd, scale, region)[want] for t, want in truths]
    assert min(rates) >= POWER - 0.025, (n, rates)
    if n > 2:
        assert min(_decided(rng, n - 1, t, sd, scale, region)[want] for t, want in truths) < POWER + 0.025


def test_the_minimal_effect_comes_from_the_region_never_from_the_estimate():
    sd = 0.3
    near, far = (plan(_interval(3, c, sd, "z"), Region.direction(-1)) for c in (-0.05, -2.0))
    assert near["seeds_to_decide"] == far["seeds_to_decide"]  # the estimate's distance plays no part
    assert near["min_effect"] == pytest.approx(math.atanh(MIN_CORRELATION))
    assert plan(_interval(3, 0.0, sd, "raw"), Region.direction(+1))["seeds_to_decide"] == ""  # a sign, no size
    tol = plan(_interval(3, 1.0, 0.1, "raw"), Region.around(1.0, 0.2))
    assert tol["min_effect"] == pytest.approx(0.2)
    thr = plan(_interval(3, 0.5, 0.1, "raw"), Region.at_least(0.8))
    assert thr["min_effect"] == pytest.approx(0.2)  # 25 % of the threshold


def test_the_power_formulas_match_their_definitions():
    """P_out is the noncentral t; P_in integrates the normal over the SD's sampling distribution."""
    rng = np.random.default_rng(3)
    n, d1, d2, sd = 6, 0.5, 0.7, 0.4
    v = sd * rng.standard_normal((20000, n))
    m, s = v.mean(axis=1), v.std(axis=1, ddof=1)
    h = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    assert p_inside(n, d1, d2, sd) == pytest.approx(np.mean((m - h > -d1) & (m + h < d2)), abs=0.01)
    assert p_outside(n, 0.5, sd) == pytest.approx(np.mean(m + 0.5 - h > 0), abs=0.01)
    with pytest.raises(ValueError, match="δ > 0 and sd > 0"):
        seeds_to_decide(0.0, 1.0)
    assert str(seeds_to_decide(1e-9, 1.0)).startswith(">")


def test_the_plan_reads_the_intervals_scale():
    raw = seed_interval([0.1, 0.3, 0.25])
    sc = t_scale(raw)
    assert sc.name == "raw" and sc.unit == "seeds" and sc.sd == pytest.approx(np.std([0.1, 0.3, 0.25], ddof=1))
    # a correlation over runs: Fisher z, the boundary r = 0 at z = 0
    x = np.tile(np.arange(6.0), 3)
    y = x + np.random.default_rng(1).normal(0, 2, x.size)
    r = correlation_interval(x, y, np.repeat([0, 1, 2], 6))
    sc = t_scale(r)
    assert sc.name == "Fisher z" and sc.centre == pytest.approx(np.arctanh(r.estimate)) and sc.unit == "runs"
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


def test_treatment_between_the_lambda_extremes_paired_by_seed():
    rows = []
    for lam, theta, ppl in ((0.0, 100.0, 50.0), (0.1, 95.0, 51.0)):
        for seed, shift in ((0, 0.0), (1, 40.0), (2, 20.0)):
            for step in (0, 10):
                rows.append({"variant": "adamw", "lam": lam, "seed": seed, "step": step, "theta_sq_norm": theta,
                             "val_ppl": ppl + shift + (0.2 * seed if lam else 0.0), "run_learned": True})
    m = pd.DataFrame(rows)
    t = treatment(m, "adamw", [0.1])  # one λ > 0: against λ = 0
    assert t["delta_theta_sq_rel"] == pytest.approx(-0.05) and t["delta_val_ppl"] == pytest.approx(1.2)
    assert t["seed_sd_val_ppl"] == pytest.approx(np.std([0, 40, 20], ddof=1) + 0.0, rel=0.01)
    assert t["lambda_visible"] is False  # against the seed spread the change is invisible …
    assert t["paired_sd_val_ppl"] == pytest.approx(0.2) and t["paired_seeds"] == 3  # … within seed it is not
    lo, hi = t["paired_ci_val_ppl"]
    assert 0 < lo < 1.2 < hi
    assert treatment(m, "adamw", [0.0]) == {}
