"""Time to a target (villani.statistics.convergence): the common target every run reaches, t₉₀ to a run's own
floor, and a pair of curves on which the two disagree — the case Fig 5's speed row exists for."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from villani.statistics.convergence import T90, drop_level, first_reach, loss_window, moving_average, run_times


def _curve(floor, tau, steps=np.arange(0, 61)):
    """A loss falling from 6.2 to ``floor`` with time constant ``tau``."""
    return steps, floor + (6.2 - floor) * np.exp(-steps / tau)


def test_moving_average_is_pandas_centred_rolling_mean():
    y = np.random.default_rng(3).normal(size=80)
    for w in (1, 2, 5, 6, 15):
        np.testing.assert_allclose(moving_average(y, w), pd.Series(y).rolling(w, center=True, min_periods=1).mean())
    assert loss_window(240) == 6 and loss_window(10) == 1
    with pytest.raises(ValueError, match="window must be >= 1"):
        moving_average(y, 0)


def test_first_reach_and_drop_level():
    assert first_reach([0, 5, 10], [3.0, 2.0, 1.0], 2.0) == 5.0
    assert first_reach([0, 5, 10], [3.0, 2.5, 2.1], 2.0) is None
    assert drop_level(6.0, 2.0) == pytest.approx(6.0 - T90 * 4.0)


def test_over_regularised_run_is_first_to_its_own_floor_and_last_to_the_common_target():
    """A lower floor reached slowly (λ small) against a higher floor reached fast (λ large): t₉₀ to
    the own floor says the large λ converges faster, the common target says it is slower."""
    small, large = _curve(3.0, 8.0), _curve(4.2, 5.0)
    t = run_times({"small": small, "large": large})
    assert t.target == pytest.approx(6.2 - T90 * (6.2 - large[1].min()))
    assert t.runs["large"].to_own < t.runs["small"].to_own          # own floor: "faster"
    assert t.runs["large"].to_common > t.runs["small"].to_common    # common target: slower
    # every run reaches the common target, the highest floor's run at its own t₉₀
    assert t.runs["large"].to_common == t.runs["large"].to_own
    assert all(r.to_common is not None and r.lowest < t.target for r in t.runs.values())


def test_no_target_without_a_drop():
    flat = (np.arange(5), np.full(5, 3.0))
    t = run_times({"a": flat})
    assert t.target is None and t.runs["a"].to_own is None and t.runs["a"].to_common is None
    assert run_times({}).runs == {}
