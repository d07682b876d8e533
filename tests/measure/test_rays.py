"""Radial rays (Fig 2) on the trained micro GPT-Neo.

The slope of Ψ_s vs ‖θ‖² tends to λ²/s only where λ² dominates the data term's own
growth along the ray (for GPT-Neo with θ ∋ embeddings and LayerNorm gains, ‖∇L‖² grows
like c‖θ‖²; see docs/measurements.md). The micro model's rays include λ = 10, where it
does; the fitted slope's parts must add up to it and explain the small-λ deviations.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from villani.measure.rays import run_rays
from villani.plan import layout


@pytest.fixture(scope="module")
def rays(micro):
    p, root = micro
    out = run_rays(p, root, "cpu")
    table = pd.read_csv(f"{out}/rays.csv")
    slopes = json.loads(open(f"{out}/slopes.json").read())
    return p, table, slopes


def test_slope_matches_lambda_sq_over_s_where_the_regulariser_dominates(rays):
    p, _, slopes = rays
    big = [f for f in slopes["fits"] if f["lam"] == 10.0]
    assert {f["s"] for f in big} == {1.0, 2.0} and {f["kind"] for f in big} == {"random", "checkpoint"}
    for f in big:
        assert f["asymptote"] == pytest.approx(100.0 / f["s"]) and f["lemma4_lower"] == pytest.approx(50.0 / f["s"])
        assert abs(f["rel_error_asymptote"]) < 0.05, f
        assert f["within_5pct_of_asymptote"] and f["dominant_part"] == "lam_sq"
        assert f["n"] == p["rays"]["fit_points"]
    for s in slopes["summary"]:
        if s["lam"] == 10.0:
            assert s["max_abs_rel_error"] < 0.05 and s["n_random_rays"] == 2


def test_slope_parts_add_up(rays):
    _, _, slopes = rays
    for f in slopes["fits"]:
        parts = f["slope_parts"]
        assert sum(parts.values()) == pytest.approx(f["slope"], rel=1e-9, abs=1e-12)
        assert parts["lam_sq"] == pytest.approx(f["lam"] ** 2 / f["s"], rel=1e-9, abs=1e-15)
        assert f["grad_term_slope"] == pytest.approx(parts["grad_L"] + parts["cross"] + parts["lam_sq"], rel=1e-12)
        assert f["slope_stderr_from_trace"] >= 0.0
        if f["lam"] == 0.0:
            assert f["asymptote"] == 0.0 and f["rel_error_asymptote"] is None and parts["cross"] == 0.0
            assert np.isfinite(f["slope"]) and f["relative_change"] is not None


def test_every_lambda_from_the_same_L_quantities(rays):
    p, table, _ = rays
    cols = {"ray", "kind", "lam", "point", "theta_sq", "loss", "F", "grad_L_sq", "theta_dot_grad_L", "trace_L",
            "trace_L_stderr", "lam_d", "laplacian_F", "grad_F_sq", "psi_s=1.0", "psi_s=2.0"}
    assert cols <= set(table.columns)
    probes = [f"trace_L_probe{j}" for j in range(p["rays"]["num_probes"])]
    np.testing.assert_allclose(table[probes].mean(axis=1), table["trace_L"], rtol=1e-9)
    np.testing.assert_allclose(table[probes].std(axis=1, ddof=1) / np.sqrt(len(probes)), table["trace_L_stderr"],
                               rtol=1e-6)
    assert set(table["lam"]) == {0.0, 0.01, 10.0}
    assert len(table) == (p["rays"]["count"] + 1) * p["rays"]["points"] * 3
    for _, g in table.groupby(["ray", "point"]):
        for c in ("theta_sq", "loss", "grad_L_sq", "trace_L"):
            assert g[c].nunique() == 1
    lam, tsq = table["lam"], table["theta_sq"]
    np.testing.assert_allclose(table["grad_F_sq"], table["grad_L_sq"] + 2 * lam * table["theta_dot_grad_L"] + lam**2 * tsq,
                               rtol=1e-6)
    np.testing.assert_allclose(table["laplacian_F"], table["trace_L"] + table["lam_d"], rtol=1e-12)
    np.testing.assert_allclose(table["F"], table["loss"] + 0.5 * lam * tsq, rtol=1e-12)
    for s in (1.0, 2.0):
        np.testing.assert_allclose(table[f"psi_s={s}"], -table["laplacian_F"] + table["grad_F_sq"] / s, rtol=1e-9,
                                   atol=1e-9)
    # the grid: ‖θ‖² on the log grid (float32 weights: ~1e-6 relative)
    grid = np.geomspace(p["rays"]["theta_sq_min"], p["rays"]["theta_sq_max"], p["rays"]["points"])
    for _, g in table[table["lam"] == 0.0].groupby("ray"):
        np.testing.assert_allclose(g.sort_values("point")["theta_sq"], grid, rtol=1e-5)


def test_checkpoint_ray_and_provenance(rays, micro):
    p, root = micro
    _, table, slopes = rays
    ck = slopes["checkpoint_ray"]
    meta = json.loads(layout.fmt(layout.CKPT_META, root, dataset="micro", variant="adamw", lam=0.0, seed=0,
                                 step=12).read_text())
    assert ck["weights_sha256"] == meta["weights_sha256"] and ck["theta_sq_norm"] == pytest.approx(meta["theta_sq_norm"])
    assert set(table[table["kind"] == "checkpoint"]["ray"]) == {2}
    assert slopes["model"]["hidden_size"] == 4 and slopes["data"]["measurement_set"]["blocks"] == 6
    assert slopes["fit_space"] == "linear" and slopes["num_probes"] == 4


def test_directions_are_seeded_unit_vectors(micro):
    from villani.measure.rays import ray_directions
    from villani.model import model_for_run

    p, root = micro
    m = model_for_run(p, root, 0)
    a, _ = ray_directions(p, root, m)
    b, _ = ray_directions(p, root, m)
    for x, y in zip(a, b):
        assert float(x["u"].norm()) == pytest.approx(1.0, abs=1e-12)
        assert bool((x["u"] == y["u"]).all())
    assert abs(float(a[0]["u"] @ a[1]["u"])) < 0.2
