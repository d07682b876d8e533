"""The measurement's cost levers on the trained micro GPT-Neo, against its exact Hessian:
deflated trace (exact part from the Lanczos basis + remainder probes 1, 2, …), Stein's
CI target, the Lanczos residual tolerance, the SLQ start count; what the JSON records;
old JSONs and the figures that read them."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
from torch.func import functional_call, grad, jacrev

from tests.measure.conftest import load_micro_model, micro_params, set_ids
from villani.curvature import lanczos, slq_num_starts
from villani.curvature.probes import rademacher_rows
from villani.data import load_blocks
from villani.figures.trace_cv import cv_table
from villani.io.results import measure_samples, measurement_row, measurements
from villani.measure import measure_checkpoint
from villani.plan import layout

LAM, STEP = 0.01, 12


@pytest.fixture(scope="module")
def exact_H(micro):
    """The exact float64 Hessian of L at (λ = 0.01, step 12)."""
    p, root = micro
    model = load_micro_model(p, root, LAM, STEP)
    names = [n for n, _ in model.named_parameters()]
    shapes = [q.shape for _, q in model.named_parameters()]
    sizes = [q.numel() for _, q in model.named_parameters()]
    train = load_blocks(layout.fmt(layout.SPLIT, root, dataset="micro", split="train"))
    blocks = train[torch.from_numpy(set_ids(p, train.shape[0]))]

    def f(t):
        ps = {n: c.view(s) for n, c, s in zip(names, torch.split(t, sizes), shapes)}
        out = functional_call(model, ps, args=(), kwargs={"input_ids": blocks, "labels": blocks, "use_cache": False})
        return out.loss

    theta = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
    H = jacrev(grad(f), chunk_size=256)(theta)
    return 0.5 * (H + H.T)


@pytest.fixture(scope="module")
def cost_root(micro, tmp_path_factory):
    """A copy of the micro results, measured with the cost levers (the shared tree stays plain)."""
    p, root = micro
    r2 = tmp_path_factory.mktemp("cost") / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    pc = micro_params(measure={"trace_estimator": "deflated", "slq_cdf_tol": 0.05, "full_density": "ends"})
    recs = {s: json.loads(open(measure_checkpoint(pc, variant="adamw", lam=LAM, seed=0, step=s, root=r2,
                                                  device="cpu")).read()) for s in (6, STEP)}
    return pc, r2, recs


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_deflated_trace_against_the_exact_hessian(cost_root, exact_H):
    p, root, recs = cost_root
    rec = recs[STEP]
    tr = rec["trace_L"]
    H, d = exact_H, exact_H.shape[0]
    assert tr["estimator"].startswith("deflated") and tr["first_probe"] == 1
    assert tr["deflation_rank"] == rec["lanczos"]["steps"] == 12
    lo, hi = tr["ci95"]
    assert lo <= float(torch.trace(H)) <= hi
    # the same estimate, rebuilt: Q from a float64 Lanczos run of ∇²F = H + λI from probe 0,
    # samples tr(QᵀHQ) + (Pv)ᵀH(Pv) for probes 1..M
    run = lanczos(H + LAM * torch.eye(d, dtype=H.dtype), 12, seed=tr["probe_seed"], keep_basis=True)
    Q = run.basis
    assert tr["exact_part"] == pytest.approx(float(torch.trace(Q @ H @ Q.T)), rel=1e-4)
    V = rademacher_rows(tr["num_probes"] + 1, d, tr["probe_seed"])[1:]
    Y = V - (V @ Q.T) @ Q
    want = float(torch.trace(Q @ H @ Q.T)) + ((Y @ H) * Y).sum(1).numpy()
    got = measure_samples(p, root, lam=LAM, seed=0, step=STEP, kind="trace_L").sort_values("probe")["value"]
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    # the by-products: unbiased ‖H‖_F², a much smaller remainder, the block traces add up
    assert 0.5 < tr["frob_sq"] / float(H.square().sum()) < 2.0
    P = torch.eye(d, dtype=H.dtype) - Q.T @ Q
    assert 0.5 < tr["remainder_frob_sq"] / float((P @ H @ P).square().sum()) < 2.0
    assert rec["predicted_cv"] < rec["predicted_cv_plain"]
    assert sum(rec["block_traces"].values()) == pytest.approx(tr["mean"], rel=1e-9)
    assert rec["hvp_count"] == 12 + tr["num_probes"] + (rec["slq"]["num_probes"] - 1) * 8
    assert rec["precision"] == "highest" and tr["ci_rule"] == "t"


def test_slq_starts_follow_the_tolerance_except_at_the_ends(cost_root):
    p, _, recs = cost_root
    need = slq_num_starts(recs[STEP]["d"], 0.05)
    assert recs[6]["slq"]["num_probes"] == min(need, 2) and not recs[6]["slq"]["full_density"]
    assert recs[STEP]["slq"]["num_probes"] == 2 and recs[STEP]["slq"]["full_density"]
    for rec in recs.values():
        lo, hi = rec["lambda_median_ci95"]
        assert (lo is None or lo <= rec["lambda_median"]) and (hi is None or rec["lambda_median"] <= hi)


def test_ci_target_and_lanczos_tolerance(micro, exact_H, tmp_path):
    p, root = micro
    r2 = tmp_path / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    pc = micro_params(measure={"trace_estimator": "deflated", "trace_rel_ci": 0.5, "psi_rel_ci": 0.5,
                               "min_probes": 4, "lanczos_tol": 0.05})
    rec = json.loads(open(measure_checkpoint(pc, variant="adamw", lam=LAM, seed=0, step=STEP, root=r2,
                                             device="cpu")).read())
    tr = rec["trace_L"]
    assert tr["ci_rule"] == "stein two-stage" and tr["min_probes"] == 4 and tr["max_probes"] == 16
    assert 4 <= tr["num_probes"] <= 16
    lo, hi = tr["ci95"]
    assert lo <= float(torch.trace(exact_H)) <= hi
    assert tr["target_half_width"] == pytest.approx(min(
        0.5 * abs(tr["mean"]),
        *(0.5 * abs(tr["mean"] - (rec["grad_F_sq_norm"] / s - LAM * rec["d"])) for s in rec["s_values"])))
    lz = rec["lanczos"]
    assert lz["tol"] == 0.05 and 3 <= lz["steps"] <= 12
    assert lz["steps"] == 12 or lz["max_rel_residual"] <= 0.05
    assert tr["deflation_rank"] == lz["steps"] == rec["slq"]["steps_first"]
    for key, (lo, hi) in rec["psi_s_ci95"].items():
        assert hi - lo == pytest.approx(tr["ci95"][1] - tr["ci95"][0], rel=1e-9)


def test_fig9_predicts_the_estimator_used(cost_root, tmp_path):
    p, root, recs = cost_root
    rec = dict(recs[STEP])
    new = measurement_row(rec, "new.json")
    assert new["trace_L_deflation_rank"] == 12 and new["lanczos_steps"] == 12 and new["precision"] == "highest"
    m = measurements(p, root, missing_ok=True)
    assert len(m) == 2 and set(m["trace_L_deflation_rank"]) == {12}
    t = cv_table(m)
    r = t[t["step"] == STEP].iloc[0]
    tr = rec["trace_L"]
    want = math.sqrt(2 * (tr["remainder_frob_sq"] - max(tr["remainder_diag_sq"], 0.0))) / (
        math.sqrt(tr["num_probes"]) * abs(tr["mean"]))
    assert r["cv_mean_predicted"] == pytest.approx(want) and r["prediction"].startswith("deflated")
    assert r["cv_mean_predicted_plain"] == pytest.approx(rec["predicted_cv_plain"])
    plain = dict(new, trace_L_deflation_rank=0, trace_L_remainder_frob_sq=None, trace_L_remainder_diag_sq=None)
    import pandas as pd

    t_plain = cv_table(pd.DataFrame([plain]))  # a plain row: predicted from ‖H‖_F² and Σ diag²
    assert t_plain.iloc[0]["cv_mean_predicted"] == pytest.approx(t_plain.iloc[0]["cv_mean_predicted_plain"])


def test_rays_deflate_the_trace_with_a_short_lanczos_basis(micro):
    """ray_table with deflation_steps = k: the engine's deflated estimate at every point
    (Lanczos of ∇²L from probe 0, probes 1..M), k + M products per point."""
    from villani.curvature import ModelHessian, deflation_from_lanczos, hutchinson
    from villani.measure.measurement_set import measurement_batches
    from villani.measure.rays import ray_directions, ray_table
    from villani.model.causal_lm import model_for_run

    p, root = micro
    p = micro_params(rays={"through_checkpoint": False, "count": 1})
    model = model_for_run(p, root, 0)
    directions, _ = ray_directions(p, root, model)
    model = model.float().eval()
    _, batches = measurement_batches(p, root, torch.device("cpu"))
    grid = np.array([1e2, 1e6])
    table = ray_table(model, batches, directions, grid, lambdas=[0.0], s_values=[1.0], num_probes=3,
                      probe_seed=5, deflation_steps=4)
    ps = [q for q in model.parameters() if q.requires_grad]
    for k, tsq in enumerate(grid):
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters((math.sqrt(tsq) * directions[0]["u"]).float(), ps)
        H = ModelHessian(model, batches)
        want = hutchinson(H, 3, seed=5, first_probe=1, deflation=deflation_from_lanczos(lanczos(H, 4, seed=5,
                                                                                                keep_basis=True)))
        row = table[table["point"] == k].iloc[0]
        assert row["trace_L"] == pytest.approx(want.mean, rel=1e-5)
        assert row["trace_L_stderr"] == pytest.approx(want.stderr, rel=1e-4)
