"""Fig 3's rows: around θ₀ on every seed, slices as units (stratified by seed, Clopper–Pearson where a
fraction is reported), the by-construction part arithmetic, the trained θ as findings.

Surfaces are written in the landscape stage's format (:func:`tests.figures.synthetic.write_surface`)
with an L of our choosing, so each row can be driven to either side of its region; the real
landscape code around θ₀ is ``tests/measure/test_landscape.py``'s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import write_surface
from villani.claims.catalogue import fig3
from villani.claims.catalogue.context import Context
from villani.claims.reporting.ledger import claim_row
from villani.claims.catalogue.registry import ARITHMETIC, FINDINGS, claims
from villani.statistics.intervals import proportion_interval, stratified_interval

MATCHED = 0.035  # tiny's λ matched to the paper's 10⁻³: 1e-3 · 1e-4 · 84,000 / (0.01 · 24)


def _params(seeds=(0, 1), slices=5):
    return tiny_params(train={"lambdas": [0.0, MATCHED], "seeds": list(seeds), "langevin": {"lambdas": []}},
                       landscape={"lambdas": [0.0, MATCHED], "centers": ["init"], "slices": slices, "grid": 11})


def _valley(kind, seed, k, a, b):
    """A narrow valley along a ≈ b whose floor barely rises (isotropy ≈ 0.01), its tilt by slice and seed."""
    return 6.0 + 0.5 * (a - (0.9 + 0.02 * k + 0.01 * seed) * b) ** 2 + 0.005 * (a + b) ** 2


def _steep(kind, seed, k, a, b):
    """A round bowl of L steeper than the penalty at λ = 0.035 (λ‖θ₀‖² = 13.3)."""
    return 6.0 + 40.0 * (a * a + (1.0 + 0.02 * k + 0.01 * seed) * b * b)


def _two_minima(kind, seed, k, a, b):
    """Minima at a = ±0.6 (0.3 of the bowl's depth apart from the penalty's at λ = 0)."""
    return 6.0 + 30.0 * (a * a - 0.36) ** 2 + (2.0 + 0.1 * k + 0.05 * seed) * b * b


def _ctx(tmp_path, loss, **kw):
    p = _params(**kw)
    for lam in p["landscape"]["lambdas"]:
        write_surface(tmp_path, p, lam, loss=loss)
    return Context(p, tmp_path)


def _row(ctx, cid):
    c = next(c for c in claims(ctx.params) if c.id == cid)
    return claim_row(c, c.compute(ctx), ctx)


def test_a_valley_at_zero_and_a_bowl_at_the_matched_lambda(tmp_path):
    ctx = _ctx(tmp_path, _valley)
    bowl, valley = _row(ctx, "fig3_bowl"), _row(ctx, "fig3_valley_at_zero")
    assert valley["verdict"] == "supported" and valley["estimate"] < 0.05
    assert bowl["verdict"] == "supported" and bowl["estimate"] > 0.8
    assert "around θ₀" in bowl["measured_on"] and "seeds 0, 1: 10 random 2-D slices (5 per seed)" in bowl["measured_on"]
    assert bowl["our_lambda"] == MATCHED and bowl["paper_lambda"] == 1e-3
    flip = _row(_ctx(tmp_path / "steep", _steep), "fig3_valley_at_zero")
    assert flip["verdict"] == "refuted"  # a round L is no valley: the row can fail


def test_a_fraction_of_slices_has_a_clopper_pearson_interval_and_seeds_count_in_the_power_plan(tmp_path):
    """5/5 slices is [0.478, 1], not "exact"; 2 seeds × 5 slices, [0.69, 1]. The stratified
    interval's units are seeds, so seeds_to_decide counts seeds."""
    one = _row(_ctx(tmp_path / "one", _valley, seeds=(0,)), "fig3_unique_minimum")
    assert (one["estimate"], one["ci_high"]) == (1.0, 1.0) and one["ci_low"] == pytest.approx(0.4782, abs=1e-4)
    assert "Clopper–Pearson" in one["ci_method"] and one["verdict"] == "inconclusive"
    two = _row(_ctx(tmp_path / "two", _valley), "fig3_unique_minimum")
    assert two["ci_low"] == pytest.approx(proportion_interval(10, 10).low) and two["verdict"] == "supported"
    assert "per seed 0: 5/5, 1: 5/5" in two["note"]
    bowl = _row(_ctx(tmp_path / "three", _valley, seeds=(0, 1, 2)), "fig3_bowl")
    assert "3 seeds" in bowl["ci_method"] and "stratified by seed" in bowl["ci_method"]
    assert bowl["seed_sd"] is not None and not str(bowl["seeds_to_decide"]).startswith("n/a")


def test_unique_minima_at_zero_refute_the_papers_several_minima(tmp_path):
    """λ = 0 with one minimum on every slice: the caption's "multiple equivalent minima" is refuted,
    beside λ > 0's unique minimum — the contrast the paper draws does not hold."""
    row = _row(_ctx(tmp_path, _steep), "fig3_multiple_minima_at_zero")
    assert row["estimate"] == 0.0 and row["verdict"] == "refuted"
    two = _row(_ctx(tmp_path / "two", _two_minima), "fig3_multiple_minima_at_zero")
    assert two["estimate"] == 1.0 and two["verdict"] == "supported"


def test_valley_to_bowl_counts_slices_that_are_both(tmp_path):
    row = _row(_ctx(tmp_path, _valley), "fig3_valley_to_bowl")
    assert row["estimate"] == 1.0 and row["verdict"] == "supported"
    assert "share θ₀ (sha256) and the directions on every seed" in row["note"]
    assert _row(_ctx(tmp_path / "steep", _steep), "fig3_valley_to_bowl")["estimate"] == 0.0  # no valley to turn


def test_radial_gradients_measure_the_data_term_and_the_penalty_part_is_arithmetic(tmp_path):
    """The λ > 0 panel's extra outward slope is the penalty's own gradient: positive for every
    λ > 0 whatever L does, so that part is arithmetic. What is measured is L's weakest outward
    slope against the penalty's: a flat valley floor is < 1, a steep L > 1."""
    flat = _row(_ctx(tmp_path, _valley), "fig3_radial_gradients")
    assert flat["estimate"] < 0.2 and flat["verdict"] == "supported"
    steep = _row(_ctx(tmp_path / "steep", _steep), "fig3_radial_gradients")
    assert steep["estimate"] > 1.0 and steep["verdict"] == "refuted"
    # the statistic does not read the λ > 0 surface: L from the λ = 0 one, the penalty from its ‖θ‖²
    ctx = _ctx(tmp_path / "other", _valley)
    write_surface(tmp_path / "other", ctx.params, MATCHED, loss=_steep)
    assert _row(ctx, "fig3_radial_gradients")["estimate"] == pytest.approx(flat["estimate"])
    arith = _row(ctx, "fig3_radial_gradients_penalty")
    assert arith["class"] == ARITHMETIC and arith["estimate"] == 1e-3 and arith["verdict"] == "supported"


def test_the_trained_theta_is_a_finding_and_needs_its_centres(tmp_path):
    cs = {c.id: c for c in claims(_params())}
    assert {i for i, c in cs.items() if i.startswith("fig3") and c.table == FINDINGS} == {
        "fig3_trained_bowl_at_zero", "fig3_trained_unique_minimum_at_zero"}
    ctx = _ctx(tmp_path, _valley)  # centers: [init] — no trained surface
    row = _row(ctx, "fig3_trained_bowl_at_zero")
    assert row["verdict"] == "inconclusive" and "landscape.centers = ['init']" in row["note"]


def _beta(rng, mean, sd, size):
    k = mean * (1 - mean) / sd**2 - 1
    return rng.beta(mean * k, (1 - mean) * k, size)


@pytest.mark.parametrize("seeds,slices", [(2, 5), (4, 5), (3, 1)])
def test_stratified_interval_covers_the_mean_over_the_seeds_of_their_slices(seeds, slices):
    """Coverage at Fig 3's designs (params.yaml 2 seeds × 5 slices, strong 4 × 5, the paper presets
    3 × 1): isotropies of λ = 0 slices around θ₀ (default run: mean 0.46, SD 0.25 between slices,
    Beta-shaped), a seed effect (SD 0.1 between seeds' means), the truth the mean over these seeds
    of their slice populations' means. (At 2 slices per seed Welch's df make it conservative:
    0.97–0.98.)"""
    rng = np.random.default_rng(seeds * 10 + slices)
    hits = []
    for _ in range(2000):
        mu = np.clip(0.46 + 0.1 * rng.standard_normal(seeds), 0.2, 0.7)
        iv = stratified_interval({s: _beta(rng, m, 0.25, slices) for s, m in enumerate(mu)})
        hits.append(iv.low <= mu.mean() <= iv.high)
    assert 0.93 <= float(np.mean(hits)) <= 0.97


def test_stratified_interval_with_one_slice_per_seed_is_over_the_seeds():
    iv = stratified_interval({0: [0.2], 1: [0.6], 2: [0.5]})
    assert iv.units == 3 and iv.dof == 2 and math.isclose(iv.estimate, 13 / 30)
    assert stratified_interval({0: [1.0, 1.0], 1: [1.0, 1.0]}).low is None  # units that do not vary: none


def test_every_fig3_row_is_declared():
    ids = {c.id for c in claims(_params()) if c.module == fig3.__name__}
    assert ids == {"fig3_bowl", "fig3_valley_at_zero", "fig3_valley_to_bowl", "fig3_unique_minimum",
                   "fig3_multiple_minima_at_zero", "fig3_radial_gradients", "fig3_radial_gradients_penalty",
                   "fig3_trained_bowl_at_zero", "fig3_trained_unique_minimum_at_zero"}


@pytest.mark.parametrize("files", [["params.yaml"], ["params.yaml", "configs/strong.yaml"],
                                   ["params.yaml", "configs/laptop.yaml"], ["configs/ptb.yaml"],
                                   ["configs/wikitext103.yaml"], ["configs/paper.yaml"]])
def test_every_shipped_config_draws_fig3_around_theta0_at_its_matched_lambda(files):
    """The landscape's penalty at the λ the runs trained with: λ = 0 and our λ matched to the paper's
    10⁻³ by λ·η·T (the Fig 3 rows read that one), around θ₀ as the caption says."""
    from tests.conftest import REPO
    from villani.plan.config import dataset_names, dataset_params, load_params
    from villani.plan.paper_lambda import match

    doc = load_params([REPO / f for f in files])
    for p in [dataset_params(doc, n) for n in dataset_names(doc)] if doc.get("datasets") else [doc]:
        ours = match(p, "middle").ours
        # every shipped design has the paper's 10⁻³ (the presets against their own corpus's T)
        assert ours is not None and sorted(p["landscape"]["lambdas"]) == [0.0, ours], p["data"]["name"]
        assert "init" in p["landscape"]["centers"]
