"""measure.precision and every measure job's precision audit, on the trained micro GPT-Neo:
the audit's numbers against a direct computation, a bf16 job that passes (a loose bar) and
one that falls back to "highest" (a tight bar), tf32 on the CPU, the validator's refusals
and the parameter's one-line error."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from tests.measure.conftest import load_micro_model, micro_params
from villani.curvature import ModelHessian
from villani.curvature.probes import rademacher_rows
from villani.io.records import sealed
from villani.io.results import read_measure
from villani.measure import measure_checkpoint, precision_audit
from villani.measure.measurement_set import measurement_batches
from villani.measure.parameter_groups import group_columns
from villani.plan.config import ParamsError, resolve

LAM, STEP = 0.01, 12


def _tree(micro, tmp_path):
    p, root = micro
    r2 = tmp_path / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    return r2


def _measure(micro, tmp_path, precision: str) -> dict:
    pc = micro_params(measure={"precision": precision})
    path = measure_checkpoint(pc, variant="adamw", lam=LAM, seed=0, step=STEP, root=_tree(micro, tmp_path),
                              device="cpu")
    return read_measure(path)


def test_the_audit_is_the_stated_computation(micro, measured):
    """At "highest" the job audits bf16: its first 3 probes' products recomputed here, in
    both precisions, give the recorded numbers."""
    p, root = micro
    rec = json.loads(open(measured[(LAM, STEP)]).read())
    a = rec["precision_audit"]
    assert (a["requested"], a["used"], a["audited"], a["vectors"], a["products"]) == ("highest", "highest", "bf16", 3, 3)
    model = load_micro_model(p, root, LAM, STEP, dtype=torch.float32)
    _, batches = measurement_batches(p, root, torch.device("cpu"))
    H, Hb = ModelHessian(model, batches), ModelHessian(model, batches, precision="bf16")
    U = rademacher_rows(3, H.dim, rec["trace_L"]["probe_seed"], dtype=torch.float32)  # plain Hutchinson: probes 0..2
    R, A = H.matmat(U).double(), Hb.matmat(U).double()
    U = U.double()
    rel = ((A - R).norm(dim=1) / R.norm(dim=1)).numpy()
    delta = ((U * (A - R)).sum(1)).abs().numpy()
    quad = (U * R).sum(1).abs().numpy()
    tr = rec["trace_L"]
    assert a["rel_product_max"] == pytest.approx(rel.max(), rel=1e-3)
    assert a["rel_product_median"] == pytest.approx(np.median(rel), rel=1e-3)
    assert a["rel_quadratic_max"] == pytest.approx((delta / quad).max(), rel=1e-3)
    assert a["trace_rel_error"] == pytest.approx(delta.max() / abs(tr["mean"]), rel=1e-3)
    assert a["trace_rel_stderr"] == pytest.approx(tr["rel_stderr"], rel=1e-9)
    assert a["bound"] == pytest.approx(0.1 * tr["rel_stderr"], rel=1e-9)
    assert a["error_over_stderr"]["trace_L"] == pytest.approx(delta.max() / tr["stderr"], rel=1e-3)
    # the worst parameter group: δ summed over its coordinates, over its block trace's stderr
    blocks = H.param_blocks()
    groups = group_columns(H.names, model.config.model_type)
    worst = max(float(sum((U[:, blocks[H.names[j]]] * (A - R)[:, blocks[H.names[j]]]).sum(1) for j in cols)
                      .abs().max()) / rec["block_traces_stderr"][g] for g, cols in groups.items())
    assert a["error_over_stderr"]["block_traces"] == pytest.approx(worst, rel=1e-3)
    assert a["passed"] == all(v <= 0.1 for v in a["error_over_stderr"].values())
    assert 0 < a["rel_product_max"] < 0.1 and a["fallback"] is None  # bf16: finite, non-zero, recorded


def test_a_bf16_job_that_passes_publishes_its_bf16_trace(micro, measured, tmp_path, monkeypatch):
    monkeypatch.setattr(precision_audit, "AUDIT_FRACTION", 1e9)  # a bar any error meets
    rec = _measure(micro, tmp_path, "bf16")
    a, ref = rec["precision_audit"], json.loads(open(measured[(LAM, STEP)]).read())
    assert rec["precision"] == a["used"] == a["audited"] == "bf16" and a["passed"] and a["fallback"] is None
    assert 0 < a["rel_product_max"] < 0.1 and np.isfinite(a["trace_rel_error"])
    assert rec["trace_L"]["mean"] != ref["trace_L"]["mean"]  # bf16 products, the same probes
    assert rec["trace_L"]["mean"] == pytest.approx(ref["trace_L"]["mean"], rel=0.02)
    assert rec["top_eigenvalues"] == pytest.approx(ref["top_eigenvalues"], rel=1e-9)  # Lanczos stays highest
    # three graphs: fp32 (∇L, Lanczos), bf16 (the trace), fp32 again (SLQ, the audit)
    assert rec["cost"]["products"] == rec["hvp_count"] + 3 and rec["cost"]["graph_builds"] == 3


def test_a_failed_bf16_audit_recomputes_the_trace_at_highest(micro, measured, tmp_path, monkeypatch):
    monkeypatch.setattr(precision_audit, "AUDIT_FRACTION", 1e-12)  # a bar no rounding meets
    rec = _measure(micro, tmp_path, "bf16")
    a, ref = rec["precision_audit"], json.loads(open(measured[(LAM, STEP)]).read())
    assert (a["requested"], a["audited"], a["used"], rec["precision"]) == ("bf16", "bf16", "highest", "highest")
    assert not a["passed"] and a["fraction"] == 1e-12
    m = rec["trace_L"]["num_probes"]
    assert a["fallback"]["products"] == a["fallback"]["discarded_products"] == m and a["fallback"]["seconds"] >= 0
    assert rec["trace_L"]["mean"] == pytest.approx(ref["trace_L"]["mean"], rel=1e-9)  # the highest job's estimate
    assert rec["cost"]["products"] == rec["hvp_count"] + 3 + m


def test_tf32_on_the_cpu_is_highest_and_audits_bf16(micro, measured, tmp_path):
    rec = _measure(micro, tmp_path, "tf32")
    a, ref = rec["precision_audit"], json.loads(open(measured[(LAM, STEP)]).read())
    assert (a["requested"], a["used"], a["audited"]) == ("tf32", "highest", "bf16") and "no effect on cpu" in a["note"]
    assert rec["trace_L"]["mean"] == ref["trace_L"]["mean"] and a["passed"] == ref["precision_audit"]["passed"]


def test_the_reader_refuses_a_record_without_or_against_its_audit(measured, tmp_path):
    rec = json.loads(open(measured[(LAM, STEP)]).read())
    bad = tmp_path / "bad.json"

    def refused(r, match):
        bad.write_text(json.dumps(sealed(r)))  # the audit is checked, not only the record's own hash
        with pytest.raises(ValueError, match=match):
            read_measure(bad)

    refused({k: v for k, v in rec.items() if k != "precision_audit"}, r"bad.json: precision_audit: missing")
    refused(rec | {"schema": "villani.measure/2"},  # a record of an older villani: measured again, never read
            r'bad.json: schema: "villani.measure/2" is invalid \(expected villani.measure/4\)')
    a = rec["precision_audit"]
    refused(rec | {"precision_audit": a | {"passed": not a["passed"]}}, r"precision_audit.passed")
    failed = a | {"used": "bf16", "passed": False, "error_over_stderr": {"trace_L": 0.5}}
    refused(rec | {"precision": "bf16", "precision_audit": failed}, r"precision_audit.used: \"bf16\" is invalid")
    refused(rec | {"precision_audit": a | {"audited": "fp16"}}, r"precision_audit.audited: \"fp16\"")
    refused(rec | {"precision": "bf16"}, r"precision: \"bf16\" is invalid \(expected 'highest'")
    refused(rec | {"precision_audit": a | {"rel_product_max": -1.0}}, r"precision_audit.rel_product_max")


def test_measure_precision_values_are_named_in_one_line():
    assert resolve({"measure": {"precision": "bf16"}})["measure"]["precision"] == "bf16"
    assert resolve({})["measure"]["precision"] == "highest"
    with pytest.raises(ParamsError) as e:
        resolve({"measure": {"precision": "fp16"}}, source="params.yaml")
    assert str(e.value) == 'params.yaml: measure.precision: "fp16" is invalid (allowed: highest, tf32, bf16)'
