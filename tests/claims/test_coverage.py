"""Coverage of every interval method the claims ledger uses, at the ledger's designs.

For each method: ≥ 1,000 simulated data sets with a known truth, shaped like the ledger's
data (2–5 seeds, 3–60 checkpoints per run, 3–8 Hutchinson-mean points per ray), the
method's 95% interval computed by the shipped function, and the empirical coverage in
[0.93, 0.97]. Clopper–Pearson is computed exactly (every count's probability) and must
cover at least 95% at every true fraction — its promise; it is conservative at small n.
The checkpoint noise is autocorrelated (AR(1), φ = 0.7) with a random run effect, since
checkpoints of one run are not independent.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from villani.intervals import R_CLIP, combination_interval, correlation_interval, proportion_interval, seed_interval

N_SETS = 2000  # Monte Carlo sd of a coverage of 0.95: 0.005, the band is ±4 sd
LOW, HIGH = 0.93, 0.97


def _ar1(rng, shape, phi=0.7):
    """AR(1) noise along the last axis, unit marginal variance."""
    e = rng.standard_normal(shape)
    out = np.empty(shape)
    out[..., 0] = e[..., 0]
    for t in range(1, shape[-1]):
        out[..., t] = phi * out[..., t - 1] + np.sqrt(1 - phi**2) * e[..., t]
    return out


def _covered(ivs, truth) -> float:
    lo = np.array([iv.low for iv in ivs], dtype=float)
    hi = np.array([iv.high for iv in ivs], dtype=float)
    assert np.all(np.isfinite(lo)) and np.all(hi > lo)  # no missing, no zero-width interval
    return float(np.mean((lo <= truth) & (truth <= hi)))


@pytest.mark.parametrize("seeds,checkpoints", [(2, 4), (3, 12), (5, 60)])
def test_seed_interval_of_a_per_seed_mean_covers(seeds, checkpoints):
    rng = np.random.default_rng(seeds * 100 + checkpoints)
    mu = 0.7
    values = mu + 0.3 * rng.standard_normal((N_SETS, seeds, 1)) + _ar1(rng, (N_SETS, seeds, checkpoints))
    per_seed = values.mean(axis=2)
    cov = _covered([seed_interval(v) for v in per_seed], mu)
    assert LOW <= cov <= HIGH, cov


def _runs(rng, n_sets, seeds, checkpoints, slope):
    """x and y of every checkpoint: y = slope·x + run effect + AR(1) noise, x a run's trend."""
    x = np.linspace(0, 1, checkpoints) + 0.2 * rng.standard_normal((n_sets, seeds, checkpoints))
    y = slope * x + rng.standard_normal((n_sets, seeds, 1)) + _ar1(rng, (n_sets, seeds, checkpoints))
    return x, y


def _pearson_rows(x, y):
    xc, yc = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
    return (xc * yc).sum(-1) / np.sqrt((xc**2).sum(-1) * (yc**2).sum(-1))


@pytest.mark.parametrize("seeds,checkpoints,kind", [(2, 3, "pearson"), (2, 4, "pearson"), (3, 12, "pearson"), (5, 60, "pearson"),
                                                    (3, 20, "r2"), (3, 12, "spearman"), (2, 60, "spearman")])
def test_correlation_interval_over_runs_covers_the_mean_run_correlation(seeds, checkpoints, kind):
    rng = np.random.default_rng(seeds + checkpoints)
    slope = 1.5
    # the truth: tanh of the mean Fisher z of one run's correlation, from 50,000 simulated runs
    xt, yt = _runs(np.random.default_rng(1), 50_000, 1, checkpoints, slope)
    r = _pearson_rows(*((stats.rankdata(a, axis=-1) for a in (xt, yt)) if kind == "spearman" else (xt, yt)))
    truth = float(np.tanh(np.arctanh(np.clip(r, -R_CLIP, R_CLIP)).mean()))
    truth = truth**2 if kind == "r2" else truth
    x, y = _runs(rng, N_SETS, seeds, checkpoints, slope)
    runs = np.repeat(np.arange(seeds), checkpoints)
    ivs = [correlation_interval(x[i].ravel(), y[i].ravel(), runs, kind=kind) for i in range(N_SETS)]
    given = [iv for iv in ivs if iv.low is not None]  # two runs with the same ρ (a discrete statistic) give none
    assert len(given) >= 0.99 * N_SETS
    cov = _covered(given, truth)
    assert LOW <= cov <= HIGH, (cov, truth)


@pytest.mark.parametrize("points,probes", [(3, 4), (4, 4), (8, 8)])
def test_combination_interval_of_a_ray_slope_covers(points, probes):
    """A ray: Ψ at radii x_i (geometric) is a Hutchinson mean of M probes whose spread grows
    with the radius; the least-squares slope of the means with its Welch–Satterthwaite interval."""
    rng = np.random.default_rng(points * probes)
    x = np.geomspace(1e4, 1e7, points)
    slope, sd = 2e-4, 50.0 * (x / x[0]) ** 0.5
    w = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    samples = slope * x + 3.0 + sd * rng.standard_normal((N_SETS, probes, points))
    means, se = samples.mean(1), samples.std(1, ddof=1) / np.sqrt(probes)
    ivs = [combination_interval(float(w @ means[i]), w, se[i], np.full(points, probes - 1.0)) for i in range(N_SETS)]
    cov = _covered(ivs, slope)
    assert LOW <= cov <= HIGH, cov


@pytest.mark.parametrize("n", [3, 6, 9, 12, 24, 60])
def test_clopper_pearson_covers_at_every_true_fraction(n):
    """Exact: the probability that the interval of k ~ Binomial(n, p) covers p, summed over k."""
    ivs = [proportion_interval(k, n) for k in range(n + 1)]
    lo, hi = np.array([iv.low for iv in ivs]), np.array([iv.high for iv in ivs])
    assert np.all(hi > lo)
    for p in np.linspace(0.005, 0.995, 1000):
        cover = stats.binom.pmf(np.arange(n + 1), n, p)[(lo <= p) & (p <= hi)].sum()
        assert cover >= 0.95 - 1e-9, (n, p, cover)


def test_spearman_within_runs_of_few_checkpoints_is_not_used():
    """At < 10 checkpoints a run's ρ takes a handful of values and the t interval over-covers
    (≈ 0.99 at 2 seeds × 4 checkpoints): no interval is given."""
    iv = correlation_interval(np.arange(8.0), np.arange(8.0) ** 2, np.repeat([0, 1], 4), kind="spearman")
    assert iv.low is None and "≥ 10 checkpoints" in iv.method


def test_no_interval_when_units_do_not_vary():
    iv = seed_interval([0.5, 0.5, 0.5])
    assert iv.estimate == 0.5 and iv.low is None and iv.high is None and "every seed gives" in iv.method
    assert seed_interval([1.0]).low is None
    assert combination_interval(1.0, [1.0, -1.0], [0.0, 0.0], [3, 3]).low is None
