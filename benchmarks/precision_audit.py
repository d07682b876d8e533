"""What bf16 products add to a measurement, against its statistical error (measure.precision).

    python benchmarks/precision_audit.py                      # tiny config, trained here (~1 min on one core)
    python benchmarks/precision_audit.py --params params.yaml --results results --run 0.1,0,240

Trains the run of ``--params`` (default ``tests/configs/tiny.yaml`` over ``params.yaml``,
λ and seed of ``--run``, ``--steps`` steps) unless ``--results`` holds it, then measures
its checkpoints with ``villani measure`` as the workflow does, at ``measure.precision:
highest`` — whose audit measures bf16 — with ``--audit`` audited products instead of
the job's 3 (:data:`villani.measure.precision_audit.AUDIT_PRODUCTS`), and prints per
checkpoint the relative product error, the trace's relative error against its relative
standard error, and each quantity's error over its standard error (the bar: ≤ 0.1); and,
measured once more with every trace product in bf16 (the bar lifted), how far the whole
trace and the worst group's trace really moved, in their standard errors. Then
the seconds of one product in fp32 and in bf16 on this device (medians of 5). A
benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def _params(args) -> dict:
    from villani.plan.config import deep_merge, read_yaml, resolve

    files = args.params or [str(REPO / "params.yaml"), str(REPO / "tests/configs/tiny.yaml")]
    doc: dict = {}
    for f in files:
        doc = deep_merge(doc, read_yaml(f))
    over = {"measure": {"precision": "highest", "num_probes": args.probes}}
    if args.steps:
        over["train"] = {"steps": args.steps, "save_every": args.steps}
    return resolve(deep_merge(doc, over), source=", ".join(files))


def _train(p: dict, root: Path, lam: float, seed: int) -> None:
    from villani.data import tokenize
    from villani.plan import layout
    from villani.plan.schedule import segment_ends
    from villani.training import train_segment

    tokenize(p["data"], layout.fmt(layout.DATA_DIR, root, dataset=p["data"]["name"]))
    for end in segment_ends(p["train"]):
        train_segment(p, variant="adamw", lam=lam, seed=seed, end=end, root=root, device="cpu", progress=False)


def _seconds(p: dict, root: Path, lam: float, seed: int, step: int) -> dict:
    from villani.curvature import ModelHessian
    from villani.measure.measurement_set import measurement_batches
    from villani.plan.runs import Run
    from villani.training.checkpoint import load_run_model

    model, _ = load_run_model(p, root, Run(p["data"]["name"], "adamw", lam, seed), step, "cpu")
    _, batches = measurement_batches(p, root, torch.device("cpu"))
    out = {}
    for prec in ("highest", "bf16"):
        H = ModelHessian(model, batches, precision=prec)
        v = torch.ones(H.dim)
        H.matvec(v)  # the graph
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            H.matvec(v)
            times.append(time.perf_counter() - t0)
        out[prec] = float(np.median(times))
    return out


def _checkpoint(p: dict, root: Path, lam: float, seed: int, step: int) -> dict:
    """The audit of a "highest" job, and what a whole bf16 trace (the bar lifted) really moved:
    |tr_bf16 − tr_highest| and the worst group's, over their standard errors."""
    from villani.io.results import read_measure
    from villani.measure import measure_checkpoint, precision_audit
    from villani.plan.config import deep_merge

    def run(precision: str) -> dict:
        q = deep_merge(p, {"measure": {"precision": precision}})
        return read_measure(measure_checkpoint(q, variant="adamw", lam=lam, seed=seed, step=step, root=root,
                                               device="cpu"))

    ref = run("highest")
    bar, precision_audit.AUDIT_FRACTION = precision_audit.AUDIT_FRACTION, 1e300
    try:
        low = run("bf16")
    finally:
        precision_audit.AUDIT_FRACTION = bar
    tr, tl = ref["trace_L"], low["trace_L"]
    groups = max(abs(low["block_traces"][g] - v) / ref["block_traces_stderr"][g] for g, v in ref["block_traces"].items())
    return {"step": step, "d": ref["d"], "val_ppl": ref["val_ppl"], **ref["precision_audit"],
            "trace_moved_over_stderr": abs(tl["mean"] - tr["mean"]) / tr["stderr"],
            "group_moved_over_stderr": groups, "audit_seconds": ref["seconds_breakdown"]["precision_audit"],
            "job_seconds": ref["seconds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", nargs="*", default=None)
    ap.add_argument("--results", default=None, help="a results tree holding the run (else trained in a temp dir)")
    ap.add_argument("--run", default="0.01,0", help="λ,seed[,step …] (default: every checkpoint)")
    ap.add_argument("--steps", type=int, default=None, help="training steps (trained here only)")
    ap.add_argument("--probes", type=int, default=16)
    ap.add_argument("--audit", type=int, default=16, help="audited products per checkpoint")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from villani.measure import precision_audit
    from villani.plan.schedule import checkpoint_steps

    precision_audit.AUDIT_PRODUCTS = args.audit
    p = _params(args)
    lam, seed, *steps = args.run.split(",")
    lam, seed = float(lam), int(seed)
    steps = [int(s) for s in steps] or checkpoint_steps(p["train"])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.results or tmp)
        if args.results is None:
            _train(p, root, lam, seed)
        rows = []
        for step in steps:
            rows.append(_checkpoint(p, root, lam, seed, step))
        secs = _seconds(p, root, lam, seed, steps[-1])
    print(f"bf16 products vs fp32 'highest', λ = {lam}, seed {seed}, d = {rows[0]['d']:,}, M = {args.probes}, "
          f"{args.audit} audited products per checkpoint")
    print("| step | val ppl | ‖ΔHv‖/‖Hv‖ max (median) | trace rel. error | trace rel. stderr | audit: error/stderr of "
          "trace, worst group, ‖H‖_F² | passes 0.1 | whole bf16 trace moved, in stderr: trace, worst group |")
    for r in rows:
        e = r["error_over_stderr"]
        print(f"| {r['step']} | {r['val_ppl']:.1f} | {r['rel_product_max']:.2e} ({r['rel_product_median']:.2e}) | "
              f"{r['trace_rel_error']:.2e} | {r['trace_rel_stderr']:.3f} | {e['trace_L']:.3f}, "
              f"{e['block_traces']:.3f}, {e['frob_sq']:.3f} | {r['passed']} | {r['trace_moved_over_stderr']:.3f}, "
              f"{r['group_moved_over_stderr']:.3f} |")
    print(f"one product: {secs['highest'] * 1e3:.1f} ms fp32 'highest', {secs['bf16'] * 1e3:.1f} ms bf16 "
          f"(autocast; {secs['bf16'] / secs['highest']:.1f}×) on this CPU; the audit of a 'highest' job "
          f"({args.audit} bf16 products and their graph): {np.mean([r['audit_seconds'] for r in rows]):.2f} s of "
          f"{np.mean([r['job_seconds'] for r in rows]):.2f} s per job")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "seconds": secs}, indent=1))


if __name__ == "__main__":
    main()
