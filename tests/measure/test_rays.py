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
    from villani.model.causal_lm import model_for_run

    p, root = micro
    m = model_for_run(p, root, 0)
    a, _ = ray_directions(p, root, m)
    b, _ = ray_directions(p, root, m)
    for x, y in zip(a, b):
        assert float(x["u"].norm()) == pytest.approx(1.0, abs=1e-12)
        assert bool((x["u"] == y["u"]).all())
    assert abs(float(a[0]["u"] @ a[1]["u"])) < 0.2


#: GPT-Neo's parameter names → the group rays.csv files them under, written out by hand
#: (the reference for villani.measure.parameter_groups as the rays stage applies it)
def _reference_group(name: str) -> str:
    import re

    if re.search(r"\.(wte|wpe)\.", name):
        return "embeddings"
    if "ln_f." in name:
        return "final.layernorm"
    i, rest = re.search(r"\.h\.(\d+)\.(.*)$", name).groups()
    if rest.startswith(("ln_1.", "ln_2.")):
        return f"layer{i}.layernorm"
    if rest.startswith("mlp."):
        return f"layer{i}.mlp"
    return f"layer{i}." + {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "out"}[rest.split(".")[2]]


def test_group_gradients_match_autograd_in_float64(rays, micro):
    """rays.csv's ‖∇_g L‖² at a random ray's points against torch.autograd on a float64 copy of
    the model at θ = r·u, the mean token cross-entropy written out, grouped by hand."""
    import torch
    import torch.nn.functional as nnf

    from villani.measure.measurement_set import measurement_batches
    from villani.measure.rays import ray_directions
    from villani.model.causal_lm import model_for_run

    p, root = micro
    _, table, slopes = rays
    model = model_for_run(p, root, 0).double()
    u = ray_directions(p, root, model)[0][0]["u"]
    _, batches = measurement_batches(p, root)
    named = [(n, q) for n, q in model.named_parameters() if q.requires_grad]
    assert slopes["gradient_groups"] == {g: sum(q.numel() for n, q in named if _reference_group(n) == g)
                                         for g in dict.fromkeys(_reference_group(n) for n, _ in named)}
    rows = table[(table["ray"] == 0) & (table["lam"] == 0.0)].sort_values("point")
    for _, row in rows.head(3).iterrows():
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(float(np.sqrt(row["theta_sq"])) * u, [q for _, q in named])
        model.zero_grad()
        total, count = 0.0, 0
        for x in batches:
            logits = model(input_ids=x, use_cache=False).logits[:, :-1]
            total = total + nnf.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
            count += x[:, 1:].numel()
        (total / count).backward()
        want: dict[str, float] = {}
        for n, q in named:
            want[_reference_group(n)] = want.get(_reference_group(n), 0.0) + float(q.grad.square().sum())
        got = {c[len("grad_L_sq:"):]: row[c] for c in table.columns if c.startswith("grad_L_sq:")}
        assert set(got) == set(want)
        for g, v in want.items():
            assert got[g] == pytest.approx(v, rel=2e-3, abs=1e-12), g
        assert sum(got.values()) == pytest.approx(row["grad_L_sq"], rel=1e-9)
