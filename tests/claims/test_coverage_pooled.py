"""Coverage of the pooled-correlation intervals of Fig 7 (villani.claims.catalogue.pooled) at the ledger's designs.

The paper's R² is pooled over checkpoints × seeds; the ledger's interval is a run jackknife on
Fisher's z scale. Simulated with tests/claims/test_coverage.py's design (its ``_runs``): y =
slope·x + a run effect + AR(1) checkpoint noise (φ = 0.7), x a trend within the run plus noise; the truth is the pooled
correlation over 200,000 runs of the same design. Designs: the default's 2 runs × 3 checkpoints
after step 0, the laptop configuration's 3 × 4, 3 × 12, and PTB's 3 × 60.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.claims.test_coverage import HIGH, LOW, N_SETS, _runs
from tests.claims.test_coverage import _covered as _coverage
from villani.claims.catalogue.pooled import (pooled_correlation_interval, strength_difference_interval,
                                  stratified_correlation_interval)

def _pooled_truth(checkpoints, slope, seed):
    x, y = _runs(np.random.default_rng(seed), 1, 200_000, checkpoints, slope)
    return float(np.corrcoef(x.ravel(), y.ravel())[0, 1])


@pytest.mark.parametrize("runs,checkpoints", [(2, 3), (3, 4), (3, 12), (3, 60)])
@pytest.mark.slow  # 12 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_pooled_r_run_jackknife_covers_the_pooled_correlation(runs, checkpoints):
    truth = _pooled_truth(checkpoints, 1.5, 2)
    x, y = _runs(np.random.default_rng(runs * 100 + checkpoints), N_SETS, runs, checkpoints, 1.5)
    codes = np.repeat(np.arange(runs), checkpoints)
    ivs = [pooled_correlation_interval(x[i].ravel(), y[i].ravel(), codes) for i in range(N_SETS)]
    assert LOW <= _coverage(ivs, truth) <= HIGH


def test_pooled_r2_is_the_r_interval_squared():
    x, y = _runs(np.random.default_rng(5), 1, 6, 12, 8.0)
    codes = np.repeat(np.arange(6), 12)
    r = pooled_correlation_interval(x.ravel(), y.ravel(), codes)
    r2 = pooled_correlation_interval(x.ravel(), y.ravel(), codes, squared=True)
    assert r2.estimate == pytest.approx(r.estimate**2)
    assert r.low > 0 and (r2.low, r2.high) == pytest.approx((r.low**2, r.high**2))


@pytest.mark.parametrize("runs,checkpoints,slopes", [(2, 3, (3.0, 0.5)), (3, 4, (3.0, 0.5)), (3, 12, (3.0, 0.5)),
                                                     (3, 4, (1.5, 1.5))])
@pytest.mark.slow  # 20 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_strength_difference_jackknife_over_seeds_covers(runs, checkpoints, slopes):
    """Fig 7's "correlation strength increases with λ": atanh|r_pool| at one λ − at another, each seed
    holding one run of each; the truth from 200,000 runs per group."""
    truth = float(np.arctanh(abs(_pooled_truth(checkpoints, slopes[0], 2)))
                  - np.arctanh(abs(_pooled_truth(checkpoints, slopes[1], 3))))
    rng = np.random.default_rng(runs * 10 + checkpoints)
    xa, ya = _runs(rng, N_SETS, runs, checkpoints, slopes[0])
    xb, yb = _runs(rng, N_SETS, runs, checkpoints, slopes[1])
    seeds = np.tile(np.repeat(np.arange(runs), checkpoints), 2)
    group = np.repeat(["a", "b"], runs * checkpoints)
    ivs = [strength_difference_interval(np.concatenate([xa[i].ravel(), xb[i].ravel()]),
                                        np.concatenate([ya[i].ravel(), yb[i].ravel()]), group, seeds, "a", "b")
           for i in range(N_SETS)]
    assert LOW <= _coverage(ivs, truth) <= HIGH


@pytest.mark.parametrize("seeds,strata,checkpoints", [(2, 4, 3), (4, 5, 4), (3, 2, 12)])
@pytest.mark.slow  # 23 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_stratified_direction_jackknife_over_seeds_covers(seeds, strata, checkpoints):
    """Fig 7's direction within λ: the mean over λ of atanh r_pool(λ), each seed holding a run at
    every λ (the default's 2 seeds × 4 λ × 3 checkpoints after step 0, the strong configuration's
    4 × 5 × 4); slopes differ between strata, and each stratum sits at its own offset (−λd)."""
    slopes = (3.0, 0.5, 1.5, -1.0, 0.8)[:strata]
    truth = float(np.mean([np.arctanh(_pooled_truth(checkpoints, b, 2 + j)) for j, b in enumerate(slopes)]))
    rng = np.random.default_rng(seeds * 1000 + strata * 10 + checkpoints)
    xs, ys = zip(*(_runs(rng, N_SETS, seeds, checkpoints, b) for b in slopes))
    x = np.stack([x - 1e3 * j for j, x in enumerate(xs)], axis=2)  # (set, seed, stratum, checkpoint)
    y = np.stack(ys, axis=2)
    stratum = np.broadcast_to(np.arange(strata)[None, :, None], (seeds, strata, checkpoints)).ravel()
    seed = np.broadcast_to(np.arange(seeds)[:, None, None], (seeds, strata, checkpoints)).ravel()
    ivs = [stratified_correlation_interval(x[i].ravel(), y[i].ravel(), stratum, seed) for i in range(N_SETS)]
    assert LOW <= _coverage(ivs, np.tanh(truth)) <= HIGH


def test_no_interval_from_one_run():
    iv = pooled_correlation_interval([1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0], [0, 0, 0, 0])
    assert iv.estimate is not None and iv.low is None and "no interval" in iv.method
