"""Measurement at the price of its training: the preset ratio with every spectrum, and with
the shipped schedule.

    python benchmarks/measure_cost.py --results results --params params.yaml --run adamw,0.12,0,240 --threads 1

1. On one trained checkpoint (``--run variant,λ,seed,step`` of ``--params``; the presets'
   511-token blocks: ``benchmarks/blocks511.yaml``, benchmarks/README.md) it measures the
   doubly stochastic trace's variance components: the between-block variance of one block's
   trace σ²_B,1 and the probe variance σ²_v on one block, both relative to tr², from every
   measurement block's own Hutchinson estimate (``--block-probes`` each), and runs the
   estimator (:mod:`villani.curvature.trace.doubly_stochastic`, ``--groups`` groups of
   ``--ds-probes`` probes on one block each) as a check. The plain and deflated probes'
   relative variances come from that checkpoint's measure JSON (``predicted_cv_plain``,
   ``predicted_cv``, × √M).
2. With those, the cost model (:mod:`villani.measure.cost_model`, the rehearsal's 3.41 /
   3.59 training token passes per token) prints the preset ratio measurement/training of
   ``--preset`` (default ``configs/ptb.yaml``) today — every checkpoint: 60 Lanczos steps +
   Stein's 8–64 deflated probes + 1 SLQ start, the graph rebuilt for every Lanczos product
   and every ``measure.probe_block`` trace probes — and
   under the new schedule: the spectrum (top-k, density, deflated trace with its probes
   applied ``--block`` per graph build) at every ``--spectrum-every``-th checkpoint and the
   last; elsewhere ‖∇F‖² from one gradient and tr ∇²L by the doubly stochastic estimator
   with the (blocks, probes) per group that is cheapest for a ±``--rel-ci`` 95 % CI.

Each ratio is printed in the rehearsal's equal-arithmetic unit (products priced as training
tokens, as on the CPU) and on an A100 at each ``measure.precision`` (highest, tf32, bf16:
the trace products at that precision, the rest fp32 "highest"; dense peaks 19.5 / 156 /
312 TFLOP/s, :data:`villani.measure.cost_model.A100_PEAK_TFLOPS`, training in bf16).
``--components`` takes the variance components of an earlier ``--json`` instead of
measuring a checkpoint. What transfers and what is assumed is printed with the numbers. Timings are not taken:
this prints counts and token-equivalents. A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch

from villani.measure import cost_model as cm
from villani.plan.budget import ds_group_cap
from villani.plan.schedule import spectrum_at

Z = 1.959963984540054


def variance_components(params: dict, root: str, variant: str, lam: float, seed: int, step: int, *, groups: int,
                        probes: int, block_probes: int) -> dict:
    """Relative (÷ tr²) variances at one checkpoint: between-block (one block's trace over the
    measurement blocks) and a probe's on one block — both from every block's own Hutchinson
    estimate (``block_probes`` probes each: σ²_B,1 = the variance of the block estimates less
    their mean squared standard error) —, plain and deflated (the measure JSON), and a doubly
    stochastic run (``groups`` × ``probes`` on one block each) with its CI, as a check."""
    from villani.curvature import ModelHessian, hutchinson
    from villani.curvature.trace.doubly_stochastic import doubly_stochastic_trace
    from villani.io.results import read_measure
    from villani.measure.measurement_set import measurement_batches
    from villani.plan import layout
    from villani.plan.runs import Run
    from villani.training.checkpoint import load_run_model

    run = Run(params["data"]["name"], variant, lam, seed)
    rec = read_measure(run.path(layout.MEASURE_JSON, root, step=step), run, step)
    model, _ = load_run_model(params, root, run, step, "cpu")
    _, batches = measurement_batches(params, root, torch.device("cpu"))
    rows = torch.cat(batches)
    est = doubly_stochastic_trace(lambda idx: ModelHessian(model, [rows[idx]]), rows.shape[0], groups=groups,
                                  blocks=1, probes=probes, seed=0)
    per_block = [hutchinson(ModelHessian(model, [rows[i:i + 1]]), block_probes, seed=1000 + i, batch_size=block_probes)
                 for i in range(rows.shape[0])]
    means = np.array([e.mean for e in per_block])
    noise = float(np.mean([e.stderr**2 for e in per_block]))
    tr = rec["trace_L"]
    M, mean = tr["num_probes"], tr["mean"]
    return {"trace": mean, "ds_mean": est.mean, "ds_ci95": est.ci95, "n_blocks": int(rows.shape[0]),
            "block_tokens": int(rows.shape[1] - 1), "between_one": (means.var(ddof=1) - noise) / mean**2,
            "block_mean": float(means.mean()), "ds_between_one": est.between_var / mean**2,
            "between_one_upper": _between_upper(means, noise) / mean**2,
            "probe": float(np.mean([e.std**2 for e in per_block])) / mean**2,
            "plain": (rec["predicted_cv_plain"] * math.sqrt(M)) ** 2,
            "deflated": (rec["predicted_cv"] * math.sqrt(M)) ** 2 if rec.get("predicted_cv") else None}


def _between_upper(means: np.ndarray, noise: float) -> float:
    """The 95 % upper confidence bound of σ²_B,1 from n block estimates: their sample variance's
    χ² bound, (n − 1)s²/χ²_{0.025, n−1}, less the probes' noise in them."""
    from scipy import stats

    n = means.size
    return (n - 1) * float(means.var(ddof=1)) / float(stats.chi2.ppf(0.025, n - 1)) - noise


def probes_for(rel_var: float, rel_ci: float, lo: int = 2, hi: int = 10_000) -> int:
    """Samples whose mean has a 95 % half-width ≤ rel_ci (normal approximation)."""
    return int(min(hi, max(lo, math.ceil((Z / rel_ci) ** 2 * rel_var))))


def best_ds(comp: dict, n_blocks: int, block_tokens: int, rel_ci: float, scale_between: float) -> tuple:
    """The (blocks b, probes k, groups J, token-equivalents) of the cheapest DS design reaching rel_ci."""
    best = None
    for b in sorted({1, 2, 4, 8, 16, 32, n_blocks} & set(range(1, n_blocks + 1))):
        for k in (1, 2, 4, 8, 16):
            var = cm.ds_group_variance(scale_between * comp["between_one"], comp["probe"], b, n_blocks, k)
            J = probes_for(var, rel_ci)
            c = cm.Counts(J * k, J, J * k * b * block_tokens, J * b * block_tokens)
            cost = cm.token_equivalents(c)
            if best is None or cost < best[3]:
                best = (b, k, J, cost)
    return best


PRECISIONS = ("highest", "tf32", "bf16")


def _ratios(preset: dict, args, **kw) -> tuple[dict, dict]:
    """(the plan at measure.precision "highest", {column: ratio}): the rehearsal's equal-arithmetic
    unit (today's column) and an A100 at each measure.precision (cost_model.A100_PEAK_TFLOPS)."""
    out, plan = {}, None
    for prec in PRECISIONS:
        plan_p = cm.preset_plan(preset, memory_bytes=args.memory_gb * 1e9, val_tokens=args.val_tokens,
                                precision=prec, **kw)
        if prec == "highest":
            plan = plan_p
            out["equal arithmetic"] = cm.preset_ratio(plan_p["jobs"], plan_p["train_tokens"])
        out[f"A100 {prec}"] = cm.preset_ratio(plan_p["jobs"], plan_p["train_tokens"], peaks=cm.A100_PEAK_TFLOPS)
    return plan, out


def ratio_rows(preset: dict, comp: dict, args) -> list[tuple[str, dict, str]]:
    me, T = preset["measure"], int(preset["data"]["seq_len"])
    n_blocks = int(me["blocks"])
    out = []
    shipped = cm.Schedule(block=int(me.get("probe_block", 1)))  # every checkpoint, the preset's probe_block
    for m in (int(me.get("min_probes", 8)), 16, int(me["num_probes"])):
        plan, ratios = _ratios(preset, args, probes=m, schedule=shipped, sweep_at_ends=False)
        out.append((f"today, M = {m}", ratios, f"{60 + m} products/checkpoint, {shipped.block} trace probes per "
                    f"graph build, graph kept: {plan['keeps_graph']}"))
    m_defl = probes_for(comp["deflated"], args.rel_ci, lo=int(me.get("min_probes", 8)), hi=int(me["num_probes"]))
    ships = cm.Schedule.of(me)
    bounds = [("", comp["between_one"])]
    if comp.get("between_one_upper") is not None:
        bounds.append((", σ²_B at its 95 % upper bound", comp["between_one_upper"]))
    for suffix, between in bounds if ships.ds_blocks else ():  # as the preset ships it: schedule, DS, sweep arms
        var = cm.ds_group_variance(between, comp["probe"], ships.ds_blocks, n_blocks, ships.ds_probes)
        cap = ds_group_cap(int(me["num_probes"]), n_blocks, ships.ds_blocks, ships.ds_probes)
        J = min(cap, probes_for(var, args.rel_ci))
        plan, ratios = _ratios(preset, args, probes=m_defl, trace_probes=J * ships.ds_probes, schedule=ships)
        n_spec = sum(spectrum_at(ships.spectrum_every, s, plan["steps"]) for s in plan["steps"])
        out.append((f"as {args.preset} ships it{suffix}", ratios,
                    f"spectrum at {n_spec}/{len(plan['steps'])} checkpoints (M = {m_defl} deflated); elsewhere DS "
                    f"b = {ships.ds_blocks}, k = {ships.ds_probes}, J = {J} (of at most {cap}); sweep arms measured at "
                    f"{me.get('sweep_arms', 'every')} checkpoint(s)"))
    scales = (("σ²_B unscaled", 1.0), ("σ²_B scaled by tokens", comp["block_tokens"] / (T - 1)))
    if comp["block_tokens"] == T - 1:  # measured at the preset's block length: nothing to scale
        scales = (("σ²_B as measured", 1.0),)
    for every, sweep in ((args.spectrum_every, False), (10**6, False), (args.spectrum_every, True)):
        for label, scale in scales:
            b, k, J, _ = best_ds(comp, n_blocks, T - 1, args.rel_ci, scale)
            sched = cm.Schedule(spectrum_every=every, block=args.block, ds_blocks=b, ds_probes=k)
            plan, ratios = _ratios(preset, args, probes=m_defl, trace_probes=J * k, schedule=sched,
                                   sweep_at_ends=sweep)
            n_spec = sum(spectrum_at(every, s, plan["steps"]) for s in plan["steps"])
            out.append((f"new, {label}" + (", sweep arms at the ends" if sweep else ""), ratios,
                        f"spectrum at {n_spec}/{len(plan['steps'])} checkpoints (M = {m_defl} deflated, {args.block} "
                        f"per build); elsewhere DS b = {b}, k = {k}, J = {J}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--params", nargs="+", default=["params.yaml"], help="parameter files, merged in order")
    ap.add_argument("--run", default="adamw,0.12,0,240", help="variant,λ,seed,step of a measured default checkpoint")
    ap.add_argument("--preset", default="configs/ptb.yaml")
    ap.add_argument("--groups", type=int, default=24)
    ap.add_argument("--ds-probes", type=int, default=2)
    ap.add_argument("--block-probes", type=int, default=64, help="probes per measurement block for σ²_B,1")
    ap.add_argument("--rel-ci", type=float, default=0.02)
    ap.add_argument("--spectrum-every", type=int, default=30)
    ap.add_argument("--block", type=int, default=8, help="deflated probes per graph build at spectrum checkpoints")
    ap.add_argument("--memory-gb", type=float, default=80.0)
    ap.add_argument("--val-tokens", type=int, default=86_500,
                    help="forward tokens per job (PTB validation: 3,370 sentences × ≈ 25.7 GPT-2 tokens)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    ap.add_argument("--components", default=None,
                    help="the --json of an earlier run: its variance components, no checkpoint measured")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from villani.plan.config import load_params

    if args.components:  # the components of an earlier run's --json: no checkpoint needed
        with open(args.components) as f:
            comp = json.load(f)["components"]
        print(f"variance components from {args.components}")
    else:
        variant, lam, seed, step = args.run.split(",")
        comp = variance_components(load_params(args.params), args.results, variant, float(lam), int(seed),
                                   int(step), groups=args.groups, probes=args.ds_probes, block_probes=args.block_probes)
        print(f"checkpoint {args.run}: tr ∇²L = {comp['trace']:.6g} (measure JSON); mean of the {comp['n_blocks']} "
              f"blocks' own estimates ({args.block_probes} probes each) {comp['block_mean']:.6g}; doubly stochastic "
              f"(1 block of {comp['block_tokens']} tokens, {args.ds_probes} probes, {args.groups} groups) "
              f"{comp['ds_mean']:.6g}, 95% CI [{comp['ds_ci95'][0]:.6g}, {comp['ds_ci95'][1]:.6g}], its σ²_B,1/tr² "
              f"{comp['ds_between_one']:.4g}")
    print("relative variances (÷ tr²): " + ", ".join(
        f"{k} {comp[k]:.4g}" for k in ("between_one", "probe", "plain", "deflated") if comp[k] is not None))
    rows = ratio_rows(load_params([args.preset]), comp, args)
    columns = list(rows[0][1])
    print(f"\n{args.preset}: measurement / training, training-token-equivalents (±{args.rel_ci:.0%} trace CI); "
          "'equal arithmetic' prices products as training (the rehearsal's CPU unit), 'A100 <p>' at the A100's dense "
          "peaks with the trace products at measure.precision p (Lanczos, SLQ, gradients at highest)")
    print("| schedule | " + " | ".join(columns) + " | what |")
    for label, r, what in rows:
        print(f"| {label} | " + " | ".join(f"{r[c]:.2f}" for c in columns) + f" | {what} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"components": {k: (list(v) if isinstance(v, tuple) else v) for k, v in comp.items()},
                       "rows": rows}, f, indent=1, default=float)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
