"""measure.ds_blocks: the doubly stochastic trace at the checkpoints without a spectrum, in the
measure job — its record, Parquet rows, cost counts and precision audit, read back by the
validating readers; the same numbers as the estimator called directly on the same blocks."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from tests.measure.conftest import micro_params
from villani.plan.schedule import checkpoint_steps


def _measure_all(pc, root, tmp_path):
    from villani.measure import measure_checkpoint

    r2 = tmp_path / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    steps = checkpoint_steps(pc["train"])
    paths = {s: measure_checkpoint(pc, variant="adamw", lam=0.01, seed=0, step=s, root=r2, device="cpu")
             for s in steps}
    return r2, steps, paths


def test_inner_checkpoints_get_the_doubly_stochastic_trace(micro, tmp_path):
    from villani.curvature import ModelHessian
    from villani.curvature.trace.doubly_stochastic import doubly_stochastic_trace
    from villani.io.results import measurements, read_measure
    from villani.measure.measurement_set import measurement_batches
    from villani.plan.runs import Run
    from villani.training.checkpoint import load_run_model

    p, root = micro
    pc = micro_params(measure={"spectrum_every": 10, "ds_blocks": 2, "probe_block": 2, "num_probes": 8})
    r2, steps, paths = _measure_all(pc, root, tmp_path)
    inner = json.loads(open(paths[steps[1]]).read())
    tr = inner["trace_L"]
    assert tr["estimator"].startswith("doubly stochastic") and tr["first_probe"] is None
    ds = tr["doubly_stochastic"]
    # ⌈num_probes·n/(b·k)⌉ = ⌈8·6/(2·2)⌉ = 12 groups: the tokens of 8 whole-set products
    assert (ds["groups"], ds["probes_per_group"], ds["blocks_per_group"], ds["n_blocks"]) == (12, 2, 2, 6)
    assert tr["num_probes"] == inner["hvp_count"] == 24 and tr["max_probes"] == 24
    assert tr["frob_sq"] is None and inner["predicted_cv"] is None and inner["predicted_cv_plain"] is None
    assert inner["top_eigenvalues"] is None and inner["lambda_median"] is None
    # the same numbers as the estimator on the same blocks of the same checkpoint
    run = Run(pc["data"]["name"], "adamw", 0.01, 0)
    model, _ = load_run_model(pc, r2, run, steps[1], "cpu")
    _, batches = measurement_batches(pc, r2, torch.device("cpu"))
    rows = torch.cat(batches)
    direct = doubly_stochastic_trace(lambda idx: ModelHessian(model, [rows[idx]]), 6, groups=12, blocks=2, probes=2,
                                     seed=int(pc["measure"]["probe_seed"]))
    assert tr["mean"] == pytest.approx(direct.mean, rel=1e-5)
    assert tr["ci95"] == pytest.approx(list(direct.ci95), rel=1e-5)
    # the CI is over the 12 group means: t with 11 degrees of freedom
    assert tr["stderr"] == pytest.approx(direct.stderr, rel=1e-5)
    # per-group traces partition the trace; Parquet keeps the raw products and the blocks drawn
    assert sum(inner["block_traces"].values()) == pytest.approx(tr["mean"], rel=1e-9)
    df = pd.read_parquet(paths[steps[1]].replace(".json", ".parquet"))
    raw = df[df.kind == "ds_sample"].sort_values(["index", "probe"])["value"].to_numpy().reshape(12, 2)
    np.testing.assert_allclose(raw, direct.samples, rtol=1e-5, atol=1e-6 * np.abs(direct.samples).max())
    drawn = df[df.kind == "ds_group_block"].sort_values(["index", "probe"])["value"].to_numpy().reshape(12, 2)
    np.testing.assert_array_equal(drawn, direct.blocks)
    assert "frob_sq_L" not in set(df.kind) and len(df[df.kind == "trace_L"]) == 12
    # cost: 24 products + the audit's 3 (group 0's 2 probes and 1 vector topping them up,
    # recomputed in bf16) + that top-up at the job's precision, on 2 blocks' tokens; one
    # build per group + the audit's
    cost = inner["cost"]
    block_tokens = pc["data"]["seq_len"] - 1
    assert cost["products"] == 24 + 3 + 1 and cost["product_tokens"] == 28 * 2 * block_tokens
    assert cost["tokens_per_product"] == 2 * block_tokens
    assert cost["graph_builds"] == 1 + 12 + 1  # ∇L's kept graph, 12 groups, the audit's bf16 graph
    audit = inner["precision_audit"]
    assert set(audit["error_over_stderr"]) == {"trace_L", "block_traces"} and audit["vectors"] == 3
    # the spectrum checkpoints keep the whole-set estimator
    last = json.loads(open(paths[steps[-1]]).read())
    assert last["trace_L"]["doubly_stochastic"] is None and last["trace_L"]["frob_sq"] is not None
    # the validating readers take both kinds of record
    read_measure(paths[steps[1]])
    m = measurements(pc, r2, missing_ok=True).set_index("step")
    assert np.isnan(m.loc[steps[1], "trace_L_frob_sq"]) and np.isfinite(m.loc[steps[1], "trace_L_mean"])


def test_a_ci_target_counts_groups_by_stein(micro, tmp_path):
    """trace_rel_ci: a pilot of ⌈min_probes/probe_block⌉ groups, then Stein's rule, at most
    ⌈num_probes·n/(b·k)⌉ = ⌈16·6/(3·2)⌉ = 16 groups."""
    p, root = micro
    pc = micro_params(measure={"spectrum_every": 10, "ds_blocks": 3, "probe_block": 2, "num_probes": 16,
                               "trace_rel_ci": 0.5, "min_probes": 6})
    _, steps, paths = _measure_all(pc, root, tmp_path)
    tr = json.loads(open(paths[steps[1]]).read())["trace_L"]
    ds = tr["doubly_stochastic"]
    assert ds["pilot_groups"] == 3 and 3 <= ds["groups"] <= 16 == ds["max_groups"] and tr["min_probes"] == 6
    assert tr["ci_rule"] == "stein two-stage" and tr["num_probes"] == 2 * ds["groups"]


def test_ds_blocks_larger_than_the_set_is_a_one_line_error():
    from villani.plan.config import ParamsError

    with pytest.raises(ParamsError, match=r"measure.ds_blocks: 7 is invalid \(≤ measure.blocks = 6, or null\)"):
        micro_params(measure={"ds_blocks": 7})
