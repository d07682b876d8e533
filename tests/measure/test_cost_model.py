"""The cost model: token-equivalents from counts, planned counts of a preset's
measure jobs, and the preset ratio measurement/training on the shipped PTB preset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from villani.measure import cost_model as cm
from villani.plan.budget import ds_group_cap
from villani.plan.config import load_params, resolve
from villani.plan.schedule import checkpoint_steps


def test_token_equivalents_is_the_stated_sum():
    c = cm.Counts(products=3, graph_builds=2, product_tokens=300, build_tokens=200, gradient_tokens=50,
                  forward_tokens=30)
    k = cm.Constants(hvp=2.0, graph=5.0, gradient=1.0, forward=0.5)
    assert cm.token_equivalents(c, k) == 2.0 * 300 + 5.0 * 200 + 50 + 15
    assert cm.token_equivalents(c) == pytest.approx(3.41 * 300 + 3.59 * 200 + 50 + 10)
    assert (c + c).products == 6 and c.scaled(3).build_tokens == 600 and c.tokens_per_product == 100


def test_counts_refuse_bad_values_and_records_without_counts():
    with pytest.raises(ValueError, match=r"Counts.products: -1"):
        cm.Counts(-1, 0, 0, 0)
    with pytest.raises(ValueError, match=r"x.json: cost: missing"):
        cm.counts_from_record({"hvp_count": 3}, "x.json")
    with pytest.raises(ValueError, match=r"x.json: cost.build_tokens: missing"):
        cm.counts_from_record({"cost": {"products": 1, "graph_builds": 1, "product_tokens": 1}}, "x.json")
    rec = {"cost": {"products": 2, "graph_builds": 1, "product_tokens": 20, "build_tokens": 10,
                    "gradient_tokens": 0, "forward_tokens": 5, "tokens_per_product": 10}}
    assert cm.counts_from_record(rec) == cm.Counts(2, 1, 20, 10, 0, 5)


ME = resolve({"measure": {"lanczos_steps": 60, "slq_steps": 80}}).measure  # the typed section the plan reads


def test_planned_counts_graph_kept_or_rebuilt():
    kept = cm.planned_counts(ME, tokens=1000, block_tokens=100, probes=16, slq_starts=2, keeps_graph=True)
    assert kept == cm.Counts(60 + 80 + 16, 1, (60 + 80 + 16) * 1000, 1000)
    rebuilt = cm.planned_counts(ME, tokens=1000, block_tokens=100, probes=16, slq_starts=1, keeps_graph=False)
    assert rebuilt == cm.Counts(76, 76, 76_000, 76_000, 1000)
    blocked = cm.planned_counts(ME, tokens=1000, block_tokens=100, probes=16, slq_starts=1, keeps_graph=False,
                                schedule=cm.Schedule(block=4))
    assert blocked.graph_builds == 60 + 4 and blocked.products == 76


def test_planned_counts_doubly_stochastic_without_spectrum():
    s = cm.Schedule(ds_blocks=4, ds_probes=2)
    c = cm.planned_counts(ME, tokens=6400, block_tokens=100, probes=16, slq_starts=1, keeps_graph=False, schedule=s,
                          spectrum=False, noise_tokens=7, val_tokens=9)
    assert c == cm.Counts(16, 8, 16 * 400, 8 * 400, 6400 + 7, 9)
    kept = cm.planned_counts(ME, tokens=6400, block_tokens=100, probes=16, slq_starts=1, keeps_graph=True, schedule=s,
                             spectrum=False)
    assert kept == cm.Counts(16, 8, 16 * 400, 8 * 400, 6400)  # ∇L by a plain gradient: no full-set graph
    spec = cm.planned_counts(ME, tokens=6400, block_tokens=100, probes=16, slq_starts=1, keeps_graph=True, schedule=s)
    assert spec == cm.Counts(76, 1, 76 * 6400, 6400)  # spectrum checkpoints keep the fixed set


def test_precision_splits_and_prices_a_job():
    """The trace products (and their own graph) at measure.precision, the audit at the other
    one; on an A100 each part × peak(bf16)/peak(its precision): 312/19.5 = 16, 312/156 = 2, 1."""
    assert [cm.precision_factor(p, cm.A100_PEAK_TFLOPS) for p in ("highest", "tf32", "bf16")] == [16.0, 2.0, 1.0]
    assert cm.precision_factor("highest") == 1.0  # the rehearsal's equal-arithmetic unit
    with pytest.raises(ValueError, match="measure.precision: 'fp16' is invalid"):
        cm.precision_factor("fp16", cm.A100_PEAK_TFLOPS)
    kw = dict(tokens=1000, block_tokens=100, probes=16, slq_starts=1, noise_tokens=7, val_tokens=9, audit=3)
    kept = cm.planned_parts(ME, keeps_graph=True, precision="bf16", **kw)
    assert kept == {"highest": cm.Counts(60 + 3, 2, 63_000, 2000, 7, 9), "bf16": cm.Counts(16, 1, 16_000, 1000)}
    today = cm.planned_parts(ME, keeps_graph=False, precision="highest", **kw)
    assert today == {"highest": cm.Counts(76, 76, 76_000, 76_000, 1007, 9), "bf16": cm.Counts(3, 1, 3000, 1000)}
    assert cm.planned_counts(ME, keeps_graph=False, precision="highest", **kw) == cm.Counts(79, 77, 79_000, 77_000,
                                                                                            1007, 9)
    a100 = cm.job_equivalents(kept, peaks=cm.A100_PEAK_TFLOPS)
    assert a100 == pytest.approx(16 * cm.token_equivalents(kept["highest"]) + cm.token_equivalents(kept["bf16"]))
    assert cm.job_equivalents(kept) == pytest.approx(cm.token_equivalents(cm.planned_counts(
        ME, keeps_graph=True, precision="bf16", **kw)))
    p = load_params(["configs/ptb.yaml"])
    ratios = []
    for prec in ("highest", "tf32", "bf16"):
        plan = cm.preset_plan(p, probes=16, memory_bytes=80e9, precision=prec)
        ratios.append(cm.preset_ratio(plan["jobs"], plan["train_tokens"], peaks=cm.A100_PEAK_TFLOPS))
    assert ratios[0] > ratios[1] > ratios[2] > 0


def test_graph_fits_follows_the_memory_model():
    assert cm.graph_fits(511, 24e9) and not cm.graph_fits(32_704, 80e9)
    n = (0.7 * 80e9 - cm.GRAPH_FIXED_BYTES) / cm.GRAPH_BYTES_PER_TOKEN
    assert cm.graph_fits(int(n) - 1, 80e9) and not cm.graph_fits(int(n) + 1, 80e9)


def test_ptb_preset_today_is_the_issues_25x():
    """configs/ptb.yaml as the issue found it: a spectrum at every checkpoint of every run, 60
    Lanczos steps + 1 SLQ start + M = 16 probes (76 products, the issue's count), the graph
    rebuilt for every product (7 per token)."""
    p = load_params(["configs/ptb.yaml"])
    plan = cm.preset_plan(p, probes=16, memory_bytes=80e9, sweep_at_ends=False)
    tokens = 64 * 511
    assert plan["tokens_per_product"] == tokens and not plan["keeps_graph"]
    assert plan["train_tokens"] == plan["runs"] * 84_000 * 512
    n_jobs = plan["runs"] * len(plan["steps"])
    assert sum(n for n, _ in plan["jobs"]) == n_jobs
    noise = 2 * plan["runs"] * 32 * 1 * 511  # first and last checkpoint, 32 batches of 1 block
    audit = 3 * tokens * 3.41 + tokens * 3.59  # the precision audit: 3 bf16 products, one graph build
    expected = (n_jobs * ((60 + 16) * tokens * (3.41 + 3.59) + tokens + audit) + noise) / plan["train_tokens"]
    assert cm.preset_ratio(plan["jobs"], plan["train_tokens"]) == pytest.approx(expected, rel=1e-12)
    assert 23 < expected < 27  # the issue's ≈ 25×


def test_ptb_preset_as_shipped_plans_its_own_schedule():
    """configs/ptb.yaml's measure keys (spectrum_every 20, ds_blocks 1, probe_block 1,
    sweep_arms ends): 4 spectrum checkpoints per main run, the sweep arms at their ends, and
    at the other checkpoints J one-block products (one build each) on 511 tokens."""
    p = load_params(["configs/ptb.yaml"])
    me = p["measure"]
    sched = cm.Schedule.of(me)
    assert (sched.spectrum_every, sched.ds_blocks, sched.block, sched.ds_probes) == (20, 1, 1, 1)
    plan = cm.preset_plan(p, probes=8, trace_probes=229, memory_bytes=80e9, schedule=sched)
    steps = plan["steps"]
    assert sum(n for n, _ in plan["jobs"]) == 21 * 61 + 24 * 2 == 1329
    inner = dict(plan["jobs"][1][1])
    c = sum(inner.values(), cm.Counts(0, 0, 0, 0))
    assert c.products == 229 + 3 and c.product_tokens == (229 + 3) * 511  # + the audit, on group 0's block
    assert not cm.spectrum_at(20, steps[1], steps) and cm.spectrum_at(20, steps[20], steps)
    assert 1.0 < cm.preset_ratio(plan["jobs"], plan["train_tokens"]) < 2.0
    assert ds_group_cap(me["num_probes"], me["blocks"], 1, 1) == 64 * 64


def test_spectrum_schedule_keeps_the_ends():
    steps = [0, 10, 20, 30, 40, 50]
    assert [cm.spectrum_at(1, s, steps) for s in steps] == [True] * 6
    assert [s for s in steps if cm.spectrum_at(4, s, steps)] == [0, 40, 50]
    with pytest.raises(ValueError, match="measure.spectrum_every: 0"):
        cm.spectrum_at(0, 0, steps)


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_every_measure_json_records_its_counts(measured, micro):
    """measure_checkpoint's ``cost``: every product on the whole set (the estimators' and the
    precision audit's), two graphs kept on CPU (fp32 for the job, bf16 for the audit), the
    gradient-noise batches at the first and last checkpoint, the validation forward pass."""
    p, _ = micro
    steps = checkpoint_steps(p["train"])
    for (lam, step), path in measured.items():
        rec = json.loads(open(path).read())
        c = cm.counts_from_record(rec, path)
        tokens = rec["measurement_set"]["num_tokens"]
        assert rec["precision_audit"]["products"] == 3 and rec["precision_audit"]["fallback"] is None
        assert c.products == rec["hvp_count"] + 3 and c.graph_builds == 2 and rec["cost"]["graph_kept"]
        assert c.product_tokens == c.products * tokens and c.build_tokens == 2 * tokens
        assert rec["cost"]["tokens_per_product"] == tokens and c.forward_tokens == rec["val_tokens"]
        noise = rec["grad_noise"]
        want = 0 if noise is None else noise["num_batches"] * noise["batch_size"] * (p["data"]["seq_len"] - 1)
        assert c.gradient_tokens == want and (noise is not None) == (step in (steps[0], steps[-1]))
        assert rec["cost"]["training_token_equivalents"] == pytest.approx(cm.token_equivalents(c), rel=1e-12)


def test_sweep_arms_at_the_ends_drop_their_inner_checkpoints():
    p = load_params(["configs/ptb.yaml"])
    plan = cm.preset_plan(p, probes=16, memory_bytes=80e9, sweep_at_ends=True)
    counts = [n for n, _ in plan["jobs"]]
    assert counts[0] == counts[-1] == plan["runs"] and set(counts[1:-1]) == {plan["runs"] - 2 * 12}  # 2 lr × 4 λ × 3 seeds


def test_spectrum_schedule_in_the_measure_job(micro, tmp_path):
    """measure.spectrum_every: the inner checkpoints get Ψ_s and a plain trace only, their
    spectrum fields are null, and the validating reader takes them (the spectrum ones keep theirs)."""
    import shutil

    from tests.measure.conftest import micro_params
    from villani.io.results import measurements
    from villani.measure import measure_checkpoint

    p, root = micro
    r2 = tmp_path / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    pc = micro_params(measure={"trace_estimator": "deflated", "spectrum_every": 10})
    steps = checkpoint_steps(pc["train"])
    assert len(steps) >= 3
    recs = {s: json.loads(open(measure_checkpoint(pc, variant="adamw", lam=0.01, seed=0, step=s, root=r2,
                                                  device="cpu")).read()) for s in steps}
    inner, last = recs[steps[1]], recs[steps[-1]]
    assert inner["top_eigenvalues"] is None and inner["lanczos"] is None and inner["lambda_median"] is None
    assert inner["trace_L"]["estimator"] == "hutchinson (Rademacher)" and inner["trace_L"]["first_probe"] == 0
    assert inner["hvp_count"] == inner["trace_L"]["num_probes"] == inner["cost"]["products"] - 3  # + the audit
    assert last["top_eigenvalues"] and last["trace_L"]["deflation_rank"] > 0
    assert last["hvp_count"] > last["trace_L"]["num_probes"]
    m = measurements(pc, r2, missing_ok=True).set_index("step")  # only the λ = 0.01 run is measured here
    assert np.isnan(m.loc[steps[1], "lambda_max"]) and np.isfinite(m.loc[steps[-1], "lambda_max"])
    assert np.isfinite(m.loc[steps[1], "trace_L_mean"])


def test_the_reader_refuses_a_bad_cost_object(measured, tmp_path):
    from villani.io.results import read_measure

    rec = json.loads(open(next(iter(measured.values()))).read())
    assert read_measure(next(iter(measured.values())))["cost"]["products"] == rec["hvp_count"] + 3  # + the audit
    for change, msg in (({"graph_builds": -1}, r"cost.graph_builds"), ({"products": 1.5}, r"cost.products")):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**rec, "cost": {**rec["cost"], **change}}))
        with pytest.raises(ValueError, match=msg):
            read_measure(bad)
    del rec["cost"]["build_tokens"]
    bad.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match=r"cost.build_tokens"):
        read_measure(bad)


def test_cost_counts_with_the_graph_rebuilt_per_call():
    """20 Lanczos/SLQ products + 10 probes in blocks of 4 (3 calls): 23 builds when the graph
    does not fit; hutchinson calls its callback once per operator call."""
    import torch

    from villani.curvature import DenseOperator, hutchinson
    from villani.measure.cost_model import cost_counts

    calls = []
    hutchinson(DenseOperator(torch.eye(5, dtype=torch.float64)), 10, batch_size=4, callback=lambda *a: calls.append(a))
    assert len(calls) == 3
    c = cost_counts(30, 100, graph_kept=False, noise_tokens=0, val_tokens=0, hutchinson_products=10,
                    hutchinson_calls=len(calls))
    assert (c["products"], c["graph_builds"], c["build_tokens"], c["gradient_tokens"]) == (30, 23, 2300, 100)
    kept = cost_counts(30, 100, graph_kept=True, noise_tokens=0, val_tokens=0, hutchinson_products=10,
                       hutchinson_calls=3)
    assert (kept["graph_builds"], kept["build_tokens"], kept["gradient_tokens"]) == (1, 100, 0)


def _measure_again(micro, measured, tmp_path, **measure) -> tuple[dict, dict]:
    """(the fixture's first measure JSON, the same checkpoint measured again in a fresh results
    root with the ``measure`` keys changed)."""
    import shutil

    from villani.measure import measure_checkpoint

    p, root = micro
    r2 = tmp_path / "results"
    shutil.copytree(root / "data", r2 / "data")
    shutil.copytree(root / "runs", r2 / "runs", ignore=shutil.ignore_patterns("measure"))
    (lam, step), path = next(iter(measured.items()))
    again = measure_checkpoint(resolve({**p, "measure": {**p["measure"], **measure}}), variant="adamw", lam=lam, seed=0,
                               step=step, root=r2, device="cpu")
    return json.loads(open(path).read()), json.loads(open(again).read())


def test_probe_blocks_change_nothing_where_the_graph_is_kept(micro, measured, tmp_path):
    base, blocked = _measure_again(micro, measured, tmp_path, probe_block=4)
    assert blocked["trace_L"]["mean"] == pytest.approx(base["trace_L"]["mean"], rel=1e-12)
    assert blocked["cost"]["graph_builds"] == 2 and blocked["cost"]["products"] == base["cost"]["products"]


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_forward_over_reverse_counts_a_build_per_product(micro, measured, tmp_path):
    """hvp_method fwd_over_rev keeps no graph: every product reruns forward and backward, so
    the record says graph_kept false and as many builds as products (blocks or not), and ∇L
    by a plain gradient pass; the trace is the double backward's, to rounding."""
    base, fwd = _measure_again(micro, measured, tmp_path, hvp_method="fwd_over_rev", probe_block=2)
    assert fwd["trace_L"]["mean"] == pytest.approx(base["trace_L"]["mean"], rel=1e-5)
    c = fwd["cost"]
    assert not c["graph_kept"] and base["cost"]["graph_kept"]
    assert c["graph_builds"] == c["products"] == base["cost"]["products"]
    assert c["gradient_tokens"] == base["cost"]["gradient_tokens"] + c["tokens_per_product"]
