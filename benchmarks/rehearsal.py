"""Rehearsal at the paper's model size on CPU: every job of ``configs/rehearsal.yaml``, timed and measured.

    python benchmarks/rehearsal.py [--jobs 1] [--threads 1] [--results results/rehearsal] [--fresh]

``configs/rehearsal.yaml`` is the PTB preset with only lengths cut: GPT-Neo-125M from its
config (d = 125,198,592), sequence length 512, the paper's λ list and noise run, one
seed, checkpoints at steps 0 and 2, the paper's measurement settings with probe and step
counts cut, on a local corpus. This script runs the workflow's jobs in the workflow's
order — tokenize; the training segments; the measurements, rays and landscapes; bounds
and cost; figures; metrics — each as the workflow runs it, one ``villani <stage> …``
process per job (``--jobs N`` at a time within a stage), plus two memory probes (the
gradient graph and one HVP at 1 and 2 measurement blocks, to fit how a measure job's
peak memory grows with tokens per HVP). Each job runs inside
:class:`villani.measure.hvp_cost.PeakMemory` (torch's own allocation accounting; on CPU
the profiler's memory events, whose bookkeeping adds a little time to every op), and
its process's peak RSS is recorded beside it.

Per job type it prints: jobs, wall time, the share of a core the job got (its CPU time
over its wall time: the machine may be shared), peak memory (torch; and RSS),
Hessian-vector products, seconds per HVP and per training token (wall, and "one core":
wall × core share, what a job alone on a core would take) — and writes everything to
``<results>/rehearsal.json``; then scales the measured one-core costs to an A100 by FLOPs
for each preset (``--presets``; assumptions at :data:`A100_BF16` below): the numbers of
``docs/running/performance.md``, "What a preset costs". Job logs (with the progress lines) are in
``<results>/rehearsal-logs/``. A rerun skips jobs that already succeeded (``--fresh``
starts over). Timings are machine-dependent; this is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "rehearsal.yaml"
GiB = 2.0**30


# ----------------------------------------------------------------------------- the job list
def job_stages(p: dict, params: list[str], results: str) -> list[list[dict]]:
    """The workflow's jobs in dependency order: a list of stages, each a list of independent jobs."""
    from villani.plan import layout
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps, segment_ends

    common = [a for f in params for a in ("--params", f)] + ["--results", results, "--device", "cpu"]

    def job(name: str, kind: str, *args: str) -> dict:
        return {"name": name, "kind": kind, "argv": [kind, *common, *map(str, args)]}

    stages = [[job("tokenize", "tokenize")]]
    for i, end in enumerate(segment_ends(p["train"])):
        stages.append([job(f"train-{r.variant}-lam{layout.format_lam(r.lam)}-seed{r.seed}-seg{end}", "train",
                           "--variant", r.variant, "--lam", r.lam, "--seed", r.seed, "--until", end)
                       for r in runs(p)])
    curvature = [job(f"measure-{r.variant}-lam{layout.format_lam(r.lam)}-seed{r.seed}-step{s}", "measure",
                     "--variant", r.variant, "--lam", r.lam, "--seed", r.seed, "--step", s)
                 for r in runs(p) for s in checkpoint_steps(p["train"])]
    curvature.append(job("rays", "rays"))
    curvature += [job(f"landscape-lam{layout.format_lam(lam)}", "landscape", "--lam", lam)
                  for lam in p["landscape"]["lambdas"]]
    curvature += [{"name": f"memory-probe-{b}blocks", "kind": "memory_probe", "blocks": b} for b in (1, 2)]
    stages.append(curvature)
    stages.append([job("bounds", "bounds"), job("cost", "cost")])
    stages.append([job("figures", "figures")])
    stages.append([job("metrics", "metrics")])
    return stages


# ----------------------------------------------------------------------------- one job (child)
def memory_probe(params: list[str], results: str, blocks: int) -> dict:
    """Gradient graph + one HVP of the step-0 model on ``blocks`` measurement blocks (batch 1)."""
    import torch

    from villani.curvature import ModelHessian
    from villani.measure.measurement_set import measurement_batches
    from villani.model.causal_lm import model_for_run
    from villani.plan.config import deep_merge, load_params, resolve

    p = load_params(params)
    p = resolve(deep_merge(p, {"measure": {"blocks": int(blocks), "batch_size": 1}}), source="memory probe")
    model = model_for_run(p, results, int(p["train"]["seeds"][0]))
    _, batches = measurement_batches(p, results)
    H = ModelHessian(model, batches, lam=0.0, method=p["measure"]["hvp_method"])
    v = torch.randn(H.dim, generator=torch.Generator().manual_seed(0))
    t0 = time.perf_counter()
    H.data_grad()
    t1 = time.perf_counter()
    H.matvec(v)
    t2 = time.perf_counter()
    return {"d": H.dim, "tokens": H.num_tokens, "seconds_graph": t1 - t0, "seconds_hvp": t2 - t1}


def child(out: Path, job: dict, params: list[str], results: str) -> int:
    """Run one job in this process under PeakMemory; write its record to ``out``."""
    import torch

    from villani.measure.hvp_cost import PeakMemory

    t0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    extra: dict = {}
    with PeakMemory(torch.device("cpu")) as mem:
        if job["kind"] == "memory_probe":
            extra = memory_probe(params, results, job["blocks"])
            rc = 0
        else:
            from villani.cli import main

            rc = main(job["argv"])
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    rec = {**job, "rc": rc, "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
           "seconds": seconds, "cpu_seconds": cpu, "core_share": cpu / seconds,
           "loadavg_start_end": [load0, os.getloadavg()[0]], "peak_bytes": mem.peak(),
           "peak_source": mem.source, "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           **extra}
    out.write_text(json.dumps(rec, indent=2) + "\n")
    return rc


# ----------------------------------------------------------------------------- running
def run_stage(jobs: list[dict], args, records: dict) -> None:
    logs = Path(args.results) / "rehearsal-logs"
    recs = Path(args.results) / "rehearsal-jobs"
    logs.mkdir(parents=True, exist_ok=True)
    recs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "VILLANI_PROGRESS_INTERVAL": str(args.progress_interval)}
    if args.malloc_mmap_threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.malloc_mmap_threshold)
    todo, running = [], {}
    for j in jobs:
        rec_path = recs / f"{j['name']}.json"
        if rec_path.exists() and json.loads(rec_path.read_text()).get("rc") == 0:
            records[j["name"]] = json.loads(rec_path.read_text())
            print(f"  {j['name']}: done before, skipped", flush=True)
        else:
            todo.append(j)
    while todo or running:
        while todo and len(running) < args.jobs:
            j = todo.pop(0)
            cmd = [sys.executable, __file__, "--child", json.dumps(j), "--results", args.results,
                   "--threads", str(args.threads), *[a for f in args.params for a in ("--params", f)]]
            log = open(logs / f"{j['name']}.log", "wb")
            running[j["name"]] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log, j,
                                  time.perf_counter())
            print(f"  {j['name']}: started", flush=True)
        time.sleep(0.5)
        for name, (proc, log, j, t0) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            wall = time.perf_counter() - t0
            rec_path = recs / f"{name}.json"
            if proc.returncode != 0 or not rec_path.exists():
                raise SystemExit(f"{name} failed (rc {proc.returncode}); see {logs / (name + '.log')}")
            rec = json.loads(rec_path.read_text())
            rec["wall_process_s"] = wall  # with interpreter start and imports
            rec_path.write_text(json.dumps(rec, indent=2) + "\n")
            records[name] = rec
            print(f"  {name}: {rec['seconds']:.0f} s, peak {rec['peak_bytes'] / 2**20:,.0f} MiB (torch), "
                  f"RSS {rec['maxrss_bytes'] / 2**20:,.0f} MiB", flush=True)


# ----------------------------------------------------------------------------- summary
def _probes(rec: dict) -> int:
    """Hutchinson products of one measure JSON."""
    return int(rec["trace_L"]["num_probes"])


def _lanczos_seconds(breakdown: dict) -> float:
    """Seconds of the Lanczos and SLQ products (one phase in JSONs before the deflated trace)."""
    return breakdown["lanczos_slq"] if "lanczos_slq" in breakdown else breakdown["lanczos"] + breakdown["slq"]


def summarize(p: dict, results: str, records: dict) -> dict:
    """Per job type: jobs, seconds, peak memory, HVPs, s/HVP, s/token; plus the fitted memory line."""
    import pandas as pd

    from villani.plan import layout

    by_kind: dict[str, list[dict]] = {}
    for rec in records.values():
        by_kind.setdefault(rec["kind"], []).append(rec)
    me, ds = p["measure"], p["data"]["name"]
    out: dict = {"d": None, "types": {}}
    for kind, recs in by_kind.items():
        row = {"jobs": len(recs), "seconds_sum": sum(r["seconds"] for r in recs),
               "seconds_max": max(r["seconds"] for r in recs),
               "peak_gib": max(r["peak_bytes"] for r in recs) / GiB,
               "rss_gib": max(r["maxrss_bytes"] for r in recs) / GiB,
               "core_share": statistics.median(r["core_share"] for r in recs),
               "loadavg_max": max(max(r["loadavg_start_end"]) for r in recs)}
        if kind == "train":
            per_token, per_token_core, tps = [], [], []
            for r in recs:
                a = r["argv"]
                csv = pd.read_csv(layout.fmt(layout.SEGMENT_LOG, results, dataset=ds, variant=a[a.index("--variant") + 1],
                                             lam=float(a[a.index("--lam") + 1]), seed=int(a[a.index("--seed") + 1]),
                                             step=int(a[a.index("--until") + 1])))
                per_token.append(float((1.0 / csv["tokens_per_s"]).mean()))  # step seconds / step tokens
                per_token_core.append(per_token[-1] * r["core_share"])
                tps += list(csv["tokens_per_s"])
            row.update(s_per_token=statistics.median(per_token), tokens_per_s=statistics.median(tps),
                       s_per_token_one_core=statistics.median(per_token_core))
        if kind == "measure":
            js = []
            for r in recs:
                a = r["argv"]
                js.append(json.loads(layout.fmt(layout.MEASURE_JSON, results, dataset=ds,
                                                variant=a[a.index("--variant") + 1],
                                                lam=float(a[a.index("--lam") + 1]), seed=int(a[a.index("--seed") + 1]),
                                                step=int(a[a.index("--step") + 1])).read_text()))
            out["d"] = js[0]["d"]
            b = [j["seconds_breakdown"] for j in js]
            row.update(
                hvps=sum(j["hvp_count"] for j in js), tokens_per_hvp=js[0]["measurement_set"]["num_tokens"],
                s_per_hvp=statistics.median(x["hutchinson"] / _probes(j) for x, j in zip(b, js)),
                s_per_hvp_lanczos=statistics.median(_lanczos_seconds(x) / (j["hvp_count"] - _probes(j))
                                                    for x, j in zip(b, js)),
                s_gradient_graph=statistics.median(x["gradient"] for x in b),
                phases={k: statistics.median(x.get(k, 0.0) for x in b) for k in b[0]})
            row["hvp_over_gradient"] = row["s_per_hvp"] / row["s_gradient_graph"]
            row["s_per_hvp_one_core"] = statistics.median(x["hutchinson"] / _probes(j) * r["core_share"]
                                                          for x, j, r in zip(b, js, recs))
        if kind == "rays":
            s = json.loads((layout.fmt(layout.RAYS_DIR, results, dataset=ds) / "slopes.json").read_text())
            pts = len(s["grid"]["theta_sq"]) * (int(p["rays"]["count"]) + bool(p["rays"]["through_checkpoint"]))
            row.update(hvps=s["hvp_count"], points=pts, s_per_point=s["seconds"] / pts)
        if kind == "landscape":  # a job evaluates F at centres × slices × grid² points (its record's evaluations)
            surf = [json.loads((layout.fmt(layout.LANDSCAPE_DIR, results, dataset=ds, lam=float(
                r["argv"][r["argv"].index("--lam") + 1])) / "surface.json").read_text()) for r in recs]
            row.update(points=sum(x["evaluations"] for x in surf),
                       s_per_point=statistics.median(x["seconds"] / x["evaluations"] for x in surf))
        if kind == "memory_probe":
            pts = sorted((r["tokens"], r["peak_bytes"], r["seconds_hvp"]) for r in recs)
            (n1, m1, _), (n2, m2, _) = pts[0], pts[-1]
            slope = (m2 - m1) / (n2 - n1)
            row.update(points=[{"tokens": n, "peak_gib": m / GiB, "s_hvp": s} for n, m, s in pts],
                       bytes_per_token=slope, fixed_gib=(m1 - slope * n1) / GiB)
        out["types"][kind] = row
    return out


def print_table(summary: dict) -> None:
    order = ["tokenize", "train", "measure", "rays", "landscape", "memory_probe", "bounds", "cost", "figures", "metrics"]
    print(f"\nd = {summary['d']:,}\n")
    print("| job type | jobs | wall s (sum / max job) | core share | peak memory, torch (GiB) | peak RSS (GiB) | "
          "HVPs | s/HVP | s/training token | s/point |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in order:
        r = summary["types"].get(kind)
        if r is None:
            continue
        hv = r.get("hvps", "")
        sph = (f"{r['s_per_hvp']:.1f} (one core ≈ {r['s_per_hvp_one_core']:.1f}; {r['tokens_per_hvp']} tokens)"
               if "s_per_hvp" in r else "")
        spt = (f"{r['s_per_token'] * 1e3:.1f} ms (one core ≈ {r['s_per_token_one_core'] * 1e3:.1f} ms)"
               if "s_per_token" in r else "")
        spp = f"{r['s_per_point']:.1f} ({r['points']} points)" if "s_per_point" in r else ""
        print(f"| {kind} | {r['jobs']} | {r['seconds_sum']:.0f} / {r['seconds_max']:.0f} | {r['core_share']:.2f} | "
              f"{r['peak_gib']:.2f} | "
              f"{r['rss_gib']:.2f} | {hv} | {sph} | {spt} | {spp} |")
    m = summary["types"].get("measure")
    if m:
        print(f"\nmeasure phases (median s): {json.dumps({k: round(v, 1) for k, v in m['phases'].items()})}")
        print(f"HVP with the graph kept / gradient graph build: {m['hvp_over_gradient']:.2f}; "
              f"Lanczos s/HVP {m['s_per_hvp_lanczos']:.1f}")
    mp = summary["types"].get("memory_probe")
    if mp:
        print(f"memory probe: {json.dumps(mp['points'])}; peak ≈ {mp['fixed_gib']:.2f} GiB + "
              f"{mp['bytes_per_token'] / 2**20:.2f} MiB × tokens per HVP")


# ----------------------------------------------------------------------------- scaled to an A100
# Assumptions of the scaling (stated in docs/running/performance.md): training in bf16 autocast at 10–25% of
# the A100's 312 TFLOP/s dense bf16 peak (batch 1 × 512 tokens keeps a 125M model far from
# peak); Hessian-vector products in fp32 with matmul precision "highest" (no TF32, as
# ModelHessian sets it) at 50–70% of the 19.5 TFLOP/s fp32 peak; the CPU's ratio of an HVP's
# cost to a training token's (both fp32 there) carries over as a FLOP ratio; an A100 has
# 80 GB, of which ModelHessian keeps the gradient graph only within 70% of what is free.
A100_BF16, A100_FP32, A100_GB = 312e12, 19.5e12, 80e9
TRAIN_UTIL, HVP_UTIL = (0.10, 0.25), (0.50, 0.70)


def flops_per_token(d: int, layers: int, hidden: int, seq_len: int) -> float:
    """Training FLOPs per token: 6d (forward 2d + backward 4d) + 12·L·T·h (attention scores
    and values over the full T×T matrix eager attention computes)."""
    return 6.0 * d + 12.0 * layers * seq_len * hidden


def hvps_per_checkpoint(me: dict, d: int, steps: list[int]) -> tuple[int, int]:
    """The fewest and the most HVPs the measure jobs of one run take over its checkpoints:
    the Lanczos steps, the Hutchinson probes (with a CI target, Stein's rule stops between
    ``min_probes`` and ``num_probes``; measured counts: benchmarks/README.md) and
    the SLQ starts after the first (:func:`villani.plan.budget.budget`, a spectrum at every
    checkpoint)."""
    from villani.plan.budget import budget, slq_starts

    targeted = me.get("trace_rel_ci") is not None or me.get("psi_rel_ci") is not None
    m_hi = int(me["num_probes"])
    m_lo = min(int(me.get("min_probes", 8)), m_hi) if targeted else m_hi
    lo = hi = 0
    for step in steps:
        rest = budget(me, spectrum=True, slq_starts=slq_starts(me, d, step, steps)[0]).spectrum
        lo, hi = lo + rest + m_lo, hi + rest + m_hi
    return lo, hi


def scale_to_a100(summary: dict, preset: dict, rehearsal: dict) -> dict:
    """GPU-hours of a preset from the rehearsal's one-core costs, scaled by FLOPs (see the assumptions above)."""
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps, segment_ends

    cfg = rehearsal["model"]["config"]
    d, T = summary["d"], int(preset["data"]["seq_len"])
    F = flops_per_token(d, int(cfg["num_layers"]), int(cfg["hidden_size"]), T)
    tr, me = summary["types"]["train"], summary["types"]["measure"]
    cpu_rate = F / tr["s_per_token_one_core"]  # the CPU's FLOP/s on this model
    n_hvp = me["tokens_per_hvp"]
    c_hvp = me["s_per_hvp_one_core"] / (n_hvp * tr["s_per_token_one_core"])  # training tokens per HVP token
    c_graph = me["s_gradient_graph"] * me["core_share"] / (n_hvp * tr["s_per_token_one_core"])
    t, m = preset["train"], preset["measure"]
    n_runs = len(list(runs(preset)))  # every run is measured at every checkpoint
    steps = checkpoint_steps(t)
    ckpts = len(steps)
    train_tokens = n_runs * int(t["steps"]) * int(t["batch_size"]) * T
    tokens = int(m["blocks"]) * (T - 1)
    lo, hi = hvps_per_checkpoint(m, d, steps)
    mp = summary["types"]["memory_probe"]
    graph_bytes = mp["fixed_gib"] * GiB + mp["bytes_per_token"] * tokens
    keeps_graph = graph_bytes < 0.7 * A100_GB  # the probe's peak: weights + graph + one product
    per_hvp_tokens = tokens * (c_hvp if keeps_graph else c_hvp + c_graph)  # no graph: rebuilt for every product
    measure_flop = [n_runs * (h * per_hvp_tokens + ckpts * tokens * c_graph) * F for h in (lo, hi)]
    train_flop = train_tokens * F
    return {
        "runs": n_runs, "train_segments": n_runs * len(segment_ends(t)), "measure_jobs": n_runs * ckpts,
        "flops_per_token": F, "cpu_flops": cpu_rate, "hvp_token_cost": c_hvp, "graph_token_cost": c_graph,
        "train_tokens": train_tokens, "train_flop": train_flop,
        "train_gpu_h": [train_flop / (A100_BF16 * u) / 3600 for u in TRAIN_UTIL[::-1]],
        "hvps_per_checkpoint": [lo / ckpts, hi / ckpts], "tokens_per_hvp": tokens, "graph_gb": graph_bytes / 1e9, "keeps_graph": keeps_graph,
        "s_per_hvp": [per_hvp_tokens * F / (A100_FP32 * u) for u in HVP_UTIL[::-1]],
        "measure_gpu_h": [measure_flop[0] / (A100_FP32 * HVP_UTIL[1]) / 3600,
                          measure_flop[1] / (A100_FP32 * HVP_UTIL[0]) / 3600],
        "lanczos_basis_gb": max(int(m["lanczos_steps"]), int(m["slq_steps"])) * d * 4 / 1e9,
    }


def print_scaled(summary: dict, presets: list[str], rehearsal: dict) -> dict:
    from villani.plan.config import load_params

    out = {}
    print("\nScaled to an A100 (FLOPs; see the assumptions in benchmarks/rehearsal.py):")
    for path in presets:
        r = scale_to_a100(summary, load_params([path]), rehearsal)
        out[path] = r
        print(f"- {path}: {r['runs']} runs, {r['train_segments']} train segments, {r['measure_jobs']} measure jobs; "
              f"training {r['train_tokens'] / 1e6:,.0f}M tokens × {r['flops_per_token']:.3g} FLOP = "
              f"{r['train_flop']:.2g} FLOP ≈ {r['train_gpu_h'][0]:.1f}–{r['train_gpu_h'][1]:.1f} GPU-h; "
              f"measurement {r['hvps_per_checkpoint'][0]:.0f}–{r['hvps_per_checkpoint'][1]:.0f} HVPs × "
              f"{r['tokens_per_hvp']:,} tokens per checkpoint, "
              f"an HVP = {r['hvp_token_cost']:.2f} training tokens per token (graph build {r['graph_token_cost']:.2f}); "
              f"graph {r['graph_gb']:.0f} GB → {'kept' if r['keeps_graph'] else 'rebuilt per product'}; "
              f"≈ {r['s_per_hvp'][0]:.1f}–{r['s_per_hvp'][1]:.1f} s/HVP, "
              f"{r['measure_gpu_h'][0]:.0f}–{r['measure_gpu_h'][1]:.0f} GPU-h; Lanczos basis {r['lanczos_basis_gb']:.0f} GB")
    print(f"CPU here: {next(iter(out.values()))['cpu_flops'] / 1e9:.1f} GFLOP/s on one core (training, fp32)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", action="append", default=None, help="parameter files (default: configs/rehearsal.yaml)")
    ap.add_argument("--results", default="results/rehearsal")
    ap.add_argument("--jobs", type=int, default=1, help="jobs at a time within a stage")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per job")
    ap.add_argument("--progress-interval", type=float, default=60.0)
    ap.add_argument("--fresh", action="store_true", help="delete earlier results of the rehearsal first")
    ap.add_argument("--malloc-mmap-threshold", type=int, default=131072,
                    help="glibc MALLOC_MMAP_THRESHOLD_ of the jobs (0: glibc's default). With the default, blocks "
                         "freed under glibc's dynamic threshold (up to 32 MiB) stay in the heap and a 125M measure "
                         "job's RSS reached 17 GiB for 9.6 GiB of live tensors")
    ap.add_argument("--presets", nargs="*", default=[str(REPO / "configs" / "ptb.yaml"),
                                                       str(REPO / "configs" / "wikitext103.yaml")],
                    help="presets whose A100 cost is scaled from the rehearsal's measured costs")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.params = args.params or [str(CONFIG)]
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        job = json.loads(args.child)
        return child(Path(args.results) / "rehearsal-jobs" / f"{job['name']}.json", job, args.params, args.results)

    from villani.plan.config import load_params

    p = load_params(args.params)
    if args.fresh and Path(args.results).exists():
        shutil.rmtree(args.results)
    t0 = time.perf_counter()
    records: dict = {}
    for i, stage in enumerate(job_stages(p, args.params, args.results)):
        print(f"stage {i + 1}: {len(stage)} job(s)", flush=True)
        run_stage(stage, args, records)
    total = time.perf_counter() - t0
    summary = summarize(p, args.results, records)
    summary.update(wall_total_s=total, jobs_wall_sum_s=sum(r.get("wall_process_s", r["seconds"]) for r in records.values()),
                   jobs_at_a_time=args.jobs, threads=args.threads, params=args.params)
    import platform

    import torch

    summary.update(torch=torch.__version__, machine=platform.processor() or platform.machine(),
                   cpu_count=os.cpu_count())
    print_table(summary)
    summary["scaled_to_a100"] = print_scaled(summary, args.presets, p)
    (Path(args.results) / "rehearsal.json").write_text(json.dumps({"summary": summary, "jobs": records}, indent=2))
    print(f"\nthis invocation: {total / 60:.1f} min wall ({args.jobs} job(s) at a time, {args.threads} thread(s) each); "
          f"all jobs' processes together: {summary['jobs_wall_sum_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
