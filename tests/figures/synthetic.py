"""A realistic synthetic results tree, in the exact layout the stages write.

:func:`build_results` writes, for a resolved params dict, everything the bounds table and
the figures read: data stats, training logs and checkpoint JSONs of every run of every
variant, per-checkpoint measurement JSON + Parquet of every run, radial rays,
landscape surfaces and the HVP cost sweep. Numbers follow the tiny default model
(d ≈ 1.4e5, losses 6 → 3 nats, traces of order 10²) and obey the identities the real
stages guarantee (F = L + λ/2‖θ‖², ΔF = tr∇²L + λd, Ψ_s = −ΔF + ‖∇F‖²/s, trace
statistics computed from the stored samples).
"""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from villani.io import records, tables
from villani.io.atomic import sha256_file
from villani.io.records import sealed
from villani.plan import layout
from villani.plan.digest import run_digest, stage_digest, stage_inputs, trained_params
from villani.plan.runs import runs
from villani.plan.schedule import checkpoint_steps, checkpoints_in_segment, segment_ends
from villani.statistics.samples import fit_slope, predicted_cv, sample_stats

D = 136_832
VOCAB = 512
TRAIN_TOKENS = 183_456
#: The corpus's unigram validation perplexity in stats.json: below the Langevin arm's final
#: perplexity (≈ 210 at 24 steps) and above every other run's (≤ 160): that arm did not learn.
UNIGRAM_PPL = 180.0


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2))


def loss_at(step: float, lam: float, seed: int, variant: str = "adamw") -> float:
    base = 2.9 + 3.35 * math.exp(-step / 45.0) + 0.4 * lam * 10 + (0.3 if variant == "langevin" else 0.0)
    return base + 0.02 * math.sin(step / 7.0 + seed)


def theta_sq_at(step: float, lam: float, seed: int, variant: str = "adamw") -> float:
    if variant == "langevin":  # SGD on F shrinks θ (the coupled L2 term)
        return 380.0 * math.exp(-step / 30.0) + 20.0 + seed * 3.0
    return 380.0 + seed * 3.0 + (3.2 - 150 * lam) * step


def build_results(root: Path, params: Mapping, *, cost: bool = True, rays: bool = True,
                  landscape: bool = True) -> Path:
    root = Path(root)
    ds = params["data"]["name"]
    t = params["train"]
    steps = checkpoint_steps(t)
    seq_len = int(params["data"]["seq_len"])
    tokens_per_step = int(t["batch_size"]) * seq_len
    write_stats(root, params)
    for run in runs(params):
        rng = np.random.default_rng(zlib.crc32(f"{run.variant}/{run.lam}/{run.seed}".encode()))
        start = 0
        for end in segment_ends(t):
            rows = []
            for s in range(start + 1, end + 1):
                loss = loss_at(s, run.lam, run.seed, run.variant) + 0.15 * rng.standard_normal()
                rows.append({"step": s, "loss": loss, "lr": t["lr"], "grad_norm": 1.0 + rng.random(),
                             "theta_sq_norm": theta_sq_at(s, run.lam, run.seed, run.variant),
                             "tokens_per_s": 20000.0,
                             "wall_clock_s": 0.05 * s, "skipped": 0})
            tables.write("step_log", run.path(layout.SEGMENT_LOG, root, step=end), pd.DataFrame(rows))
            start = end
        for step in steps:
            _write_record(run.path(layout.CKPT_META, root, step=step), "checkpoint", checkpoint_meta(params, run, step))
        start = 0
        for end in segment_ends(t):  # the manifests training writes (villani.training.segments)
            _write_record(run.path(layout.SEGMENT, root, step=end), "segment", {
                "dataset": ds, "variant": run.variant, "lam": run.lam, "seed": run.seed, "start": start, "end": end, "digest": run_digest(params, run.variant, run.lam, run.seed),
                "train_params": trained_params(params, run.variant),
                "start_checkpoint": None if start == 0 else {"step": start, "weights_sha256": "0" * 64},
                "log_sha256": sha256_file(run.path(layout.SEGMENT_LOG, root, step=end)),
                "checkpoints": [{"step": s, "weights_sha256": "0" * 64,
                                 "meta_sha256": sha256_file(run.path(layout.CKPT_META, root, step=s))}
                                for s in checkpoints_in_segment(t, end)]})
            start = end
        for step in steps:
            write_measurement(root, params, run, step, rng)
    if rays:
        write_rays(root, params)
    if landscape:
        for lam in params["landscape"]["lambdas"]:
            write_surface(root, params, lam)
    if cost:
        write_cost(root, params)
    return root


def write_stats(root: Path, params: Mapping, *, vocab: int = VOCAB, train_tokens: int = TRAIN_TOKENS,
                other_tokens: tuple[int, int] = (9_800, 9_700)) -> Path:
    """stats.json as the tokenize stage writes it (villani.data.stage): ``vocab`` tokens, the
    splits' token counts, the unigram baseline :data:`UNIGRAM_PPL`."""
    seq_len = int(params["data"]["seq_len"])
    path = layout.fmt(layout.DATA_STATS, root, dataset=params["data"]["name"])
    _write_record(path, "data_stats", {
        "name": params["data"]["name"], "source": params["data"]["source"], "revision": params["data"].get("revision"),
        "seq_len": seq_len, "vocab_size": vocab, "eos_token": "<|endoftext|>", "eos_token_id": 0,
        "splits": {split: {"tokens": n, "blocks": max(n // seq_len, 1)}
                   for split, n in zip(("train", "validation", "test"), (train_tokens, *other_tokens))},
        "baselines": {"unigram": {"val_ppl": UNIGRAM_PPL, "val_loss": math.log(UNIGRAM_PPL)}},
    })
    return path


def _write_record(path: Path, kind: str, record: Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    records.write_record(path, record, kind)


def checkpoint_meta(params: Mapping, run, step: int) -> dict:
    """A checkpoint.json as training writes it (villani.training.checkpoint.save_checkpoint)."""
    t = params["train"]
    return {"dataset": run.dataset, "variant": run.variant, "lam": run.lam, "seed": run.seed, "step": step,
            "weights_sha256": "0" * 64, "config_sha256": "1" * 64, "state_sha256": None,
            "tokenizer_sha256": "2" * 64, "tokenizer_config_sha256": "3" * 64,
            "tokens_seen": step * int(t["batch_size"]) * int(params["data"]["seq_len"]), "wall_clock_s": 0.05 * step,
            "train_loss": loss_at(step, run.lam, run.seed, run.variant),
            "theta_sq_norm": max(theta_sq_at(step, run.lam, run.seed, run.variant), 0.0), "d": D,
            "decay_mode": t["decay_mode"], "decay_params": t["decay_params"],
            "digest": run_digest(params, run.variant, run.lam, run.seed),
            "train_params": trained_params(params, run.variant), "precision": "fp32"}


def provenance(root: Path, params: Mapping, run, step: int) -> dict:
    """The fields naming what a measure JSON was computed from, as `villani measure` writes
    them (villani.measure.measure_stage): the checkpoint written above, these parameters."""
    return {"weights_sha256": "0" * 64,
            "checkpoint_meta_sha256": sha256_file(run.path(layout.CKPT_META, root, step=step)),
            "train_digest": run_digest(params, run.variant, run.lam, run.seed),
            "train_params": trained_params(params, run.variant),
            "measure_digest": stage_digest(params, "measure", run.variant),
            "measure_params": stage_inputs(params, "measure", run.variant)}


def write_record(root: Path, params: Mapping, run, step: int, rec: Mapping) -> Path:
    """Write ``rec`` as `villani measure` writes a measure JSON: every key the schema requires
    (those ``rec`` leaves out, and of its ``trace_L``, from :func:`measurement`), the fields
    naming its checkpoint (a checkpoint.json is written first where the run has none) and
    parameters, sealed by its record_sha256 (villani.io.records), checked against the schema.
    Tests that change a measure JSON rewrite it through here, as a new measurement would be
    written."""
    full = measurement(params, run, step, np.random.default_rng(0))[0]
    rec = {**full, **rec, "trace_L": {**full["trace_L"], **rec.get("trace_L", {})}}
    meta = run.path(layout.CKPT_META, root, step=step)
    if not meta.exists():
        _write_record(meta, "checkpoint", checkpoint_meta(params, run, step))
    path = run.path(layout.MEASURE_JSON, root, step=step)
    _write_record(path, "measure", sealed({**rec, **provenance(root, params, run, step)}))
    return path


def write_measurement(root: Path, params: Mapping, run, step: int, rng) -> dict:
    """The measure JSON and Parquet of one checkpoint (:func:`measurement`); the record."""
    rec, samples = measurement(params, run, step, rng)
    write_record(root, params, run, step, rec)
    me, lam_d = params["measure"], rec["lam_d"]
    nodes = []
    for p in range(int(me["slq_probes"])):
        ns = np.sort(rng.normal(run.lam, 1.0, int(me["slq_steps"])))
        w = rng.dirichlet(np.ones(len(ns)))
        nodes += [{"kind": "slq_node", "probe": p, "index": i, "block": None, "value": float(v), "weight": float(wi)}
                  for i, (v, wi) in enumerate(zip(ns, w))]
    trace_rows = [{"kind": kind, "probe": i, "index": 0, "block": None, "value": float(v + shift), "weight": math.nan}
                  for kind, shift in (("trace_L", 0.0), ("trace_F", lam_d)) for i, v in enumerate(samples)]
    tables.write("measure_samples", run.path(layout.MEASURE_PARQUET, root, step=step),
                 pd.DataFrame(trace_rows + nodes).astype({"block": "string"}))
    return rec


def measurement(params: Mapping, run, step: int, rng) -> tuple[dict, np.ndarray]:
    """(a complete measure record of the run's checkpoint ``step``, without its provenance keys;
    the trace samples it was computed from)."""
    me = params["measure"]
    lam, M, k = run.lam, int(me["num_probes"]), int(me["top_k"])
    steps = checkpoint_steps(params["train"])
    theta_sq = theta_sq_at(step, lam, run.seed, run.variant)
    loss = loss_at(step, lam, run.seed, run.variant)
    val_loss = loss + 0.12 + 0.002 * step * (1 - 50 * lam)
    trace_mean = 40.0 + 260.0 * (1 - math.exp(-step / 70.0)) * (1 - 25 * lam)
    frob_sq = (0.9 * trace_mean) ** 2 / 2 + 50.0
    samples = rng.normal(trace_mean, math.sqrt(2 * frob_sq), size=M)
    st = sample_stats(samples)
    grad_L_sq = 2.5 * math.exp(-step / 60.0) + 0.05
    grad_F_sq = grad_L_sq + lam**2 * theta_sq
    lam_d = lam * D
    lap_F = st.mean + lam_d
    lmax = 6.0 + 30.0 * (1 - math.exp(-step / 60.0)) * (1 + 20 * lam) + lam
    tops = list(lmax * np.linspace(1.0, 0.25, k) + lam)
    median = 2e-3 + lam
    half = float(st.ci95[1]) - st.mean
    psi = {str(float(s)): -lap_F + grad_F_sq / float(s) for s in me["s_values"]}
    products = M + int(me["lanczos_steps"]) + int(me["slq_probes"]) * int(me["slq_steps"])
    tokens = 16 * int(params["data"]["seq_len"])
    rec = {
        "schema": "villani.measure/4", "dataset": run.dataset, "step": step, "lam": lam, "seed": run.seed,
        "variant": run.variant, "s_values": [float(s) for s in me["s_values"]], "d": D, "theta_sq_norm": theta_sq,
        "train_loss": loss, "decay_mode": params["train"]["decay_mode"], "decay_params": params["train"]["decay_params"],
        "loss": loss, "F": loss + 0.5 * lam * theta_sq, "val_loss": val_loss, "val_ppl": math.exp(val_loss),
        "val_tokens": 9_800, "grad_L_sq_norm": grad_L_sq, "grad_F_sq_norm": grad_F_sq, "theta_dot_grad_L": -0.1,
        "trace_L": {"mean": st.mean, "std": st.std, "stderr": st.stderr, "ci95": list(st.ci95), "ci_rule": "t",
                    "cv": st.cv, "rel_stderr": st.rel_stderr, "shapiro_p": st.shapiro_p, "frob_sq": frob_sq,
                    "diag_sq": None, "num_probes": M, "max_probes": M, "min_probes": None, "probe_seed": 0,
                    "first_probe": 0, "estimator": "hutchinson (Rademacher)", "deflation_rank": 0, "exact_part": 0.0,
                    "remainder_frob_sq": None, "remainder_diag_sq": None, "target_half_width": None,
                    "doubly_stochastic": None},
        "lam_d": lam_d, "laplacian_F": lap_F, "laplacian_F_ci95": [lap_F - half, lap_F + half],
        "psi_s": psi, "psi_s_ci95": {s: [v - half, v + half] for s, v in psi.items()},
        "predicted_cv_plain": predicted_cv(frob_sq, st.mean, M), "lambda_median_ci95": [0.9 * median, 1.1 * median],
        "lanczos": {"steps": int(me["lanczos_steps"]), "max_steps": int(me["lanczos_steps"]), "tol": None,
                    "max_rel_residual": 1e-3},
        "slq": {"num_probes": int(me["slq_probes"]), "max_probes": int(me["slq_probes"]),
                "steps_first": int(me["lanczos_steps"]), "steps": int(me["slq_steps"])},
        "precision": "highest",
        "precision_audit": {"requested": "highest", "used": "highest", "audited": "bf16", "vectors": 3, "products": 3,
                            "trace_rel_error": 1e-4, "trace_rel_stderr": st.rel_stderr, "fraction": 0.1,
                            "error_over_stderr": {"trace_L": 0.01}, "passed": True, "fallback": None},
        "cost": {"products": products + 3, "graph_builds": 2, "product_tokens": (products + 3) * tokens,
                 "build_tokens": 2 * tokens, "gradient_tokens": 0, "forward_tokens": 9_800,
                 "tokens_per_product": tokens},
        "block_traces": {"embeddings": 0.3 * st.mean, "h.0": 0.35 * st.mean, "h.1": 0.35 * st.mean},
        "top_eigenvalues": tops, "top_residuals": [1e-3 * x for x in tops], "lambda_max": tops[0],
        "lambda_median": median, "spectral_ratio": tops[0] / median,
        "hvp_count": products,
        "seconds": 3.2, "tokens_seen": step * int(params["train"]["batch_size"]) * int(params["data"]["seq_len"]),
        "wall_clock_s": 0.05 * step,
        # small σ² for the Langevin arm, so that its η meets Theorem 2's η ≤ λ/(4σ²)
        "grad_noise_sigma_sq": ((0.9 if step == steps[0] else 0.25) * (0.01 if run.variant == "langevin" else 1.0)
                                if step in (steps[0], steps[-1]) else None),
        "predicted_cv": predicted_cv(frob_sq, st.mean, M), "predicted_cv_bound": predicted_cv(frob_sq, st.mean, M),
        "spectrum_of": "hessian_F",
    }
    return rec, samples


#: the synthetic rays' split of ‖∇L‖² over parameter groups (rays.csv grad_L_sq:<group>)
RAY_GROUP_SHARES = {"embeddings": 0.5, "layer0.layernorm": 0.3, "layer0.mlp": 0.2}


def write_rays(root: Path, params: Mapping) -> None:
    """rays.csv and slopes.json as ``villani.rays.run_rays`` writes them (fits per ray, summary per λ, s)."""
    r = params["rays"]
    s_values = [float(s) for s in params["measure"]["s_values"]]
    grid = np.geomspace(r["theta_sq_min"], r["theta_sq_max"], int(r["points"]))
    kinds = ["random"] * int(r["count"]) + (["checkpoint"] if r["through_checkpoint"] else [])
    rows = []
    for ray, kind in enumerate(kinds):
        phase = 0.3 * ray
        for k, th in enumerate(grid):
            grad_L = 3.0 / (1 + th / 300.0) + 0.01 * phase
            trace_L = 120.0 / (1 + th / 1e3) + 5 * phase
            for lam in r["lambdas"]:
                lam = float(lam)
                grad_F = grad_L + lam**2 * th
                row = {"ray": ray, "kind": kind, "lam": lam, "point": k, "theta_sq": th,
                       "loss": 6.3 + 0.5 * (1 - 1 / (1 + th / 1e4)), "F": 6.3 + 0.5 * lam * th,
                       "grad_L_sq": grad_L, "theta_dot_grad_L": 0.0, "trace_L": trace_L, "trace_L_stderr": 2.0 * (1 + 0.1 * k),
                       "lam_d": lam * D, "laplacian_F": trace_L + lam * D, "grad_F_sq": grad_F,
                       **{f"grad_L_sq:{g}": share * grad_L for g, share in RAY_GROUP_SHARES.items()}}
                for s in s_values:
                    row[f"psi_s={float(s)}"] = -(trace_L + lam * D) + grad_F / s
                # the same probes at every point: probe j's error grows with the point (its stderr)
                probes = int(r["num_probes"])
                z = np.linspace(-1.0, 1.0, probes) / np.std(np.linspace(-1.0, 1.0, probes), ddof=1)
                row.update({f"trace_L_probe{j}": trace_L + 2.0 * np.sqrt(probes) * z[j] * (1 + 0.1 * k)
                            for j in range(probes)})
                rows.append(row)
    table = pd.DataFrame(rows)
    fits, summary = [], []
    k = int(r["fit_points"])
    for (lam, ray), g in table.groupby(["lam", "ray"]):
        g = g.sort_values("theta_sq")
        for s in s_values:
            f = fit_slope(g["theta_sq"], g[f"psi_s={float(s)}"], largest=k)
            fits.append({"lam": lam, "s": s, "ray": int(ray), "kind": g["kind"].iloc[0], "slope": f.slope,
                         "intercept": f.intercept, "stderr_slope": f.stderr_slope, "r2": f.r2, "n": f.n,
                         "theta_sq_min": f.x_min, "theta_sq_max": float(g["theta_sq"].max()),
                         "asymptote": lam**2 / s, "lemma4_lower": lam**2 / (2 * s),
                         "slope_parts": {"grad_L": 0.0, "cross": 0.0, "lam_sq": lam**2 / s, "trace": 0.0},
                         "dominant_part": "lam_sq", "slope_stderr_from_trace": 1e-7,
                         "psi_change_over_fit": f.slope * (g["theta_sq"].max() - f.x_min),
                         "relative_change": f.slope * (g["theta_sq"].max() - f.x_min)
                         / float(np.mean(np.abs(g[f"psi_s={float(s)}"].tail(k))))})
    fdf = pd.DataFrame(fits)
    for (lam, s), g in fdf.groupby(["lam", "s"]):
        rnd, ck = g[g["kind"] == "random"], g[g["kind"] == "checkpoint"]
        summary.append({"lam": lam, "s": s, "asymptote": lam**2 / s, "lemma4_lower": lam**2 / (2 * s),
                        "n_random_rays": len(rnd), "slope_mean": float(rnd["slope"].mean()),
                        "slope_min": float(rnd["slope"].min()), "slope_max": float(rnd["slope"].max()),
                        "checkpoint_slope": float(ck["slope"].iloc[0]) if len(ck) else None})
    d = layout.fmt(layout.RAYS_DIR, root, dataset=params["data"]["name"])
    tables.write("rays", d / "rays.csv", table)
    _write_json(d / "slopes.json", {"dataset": params["data"]["name"], "fit_points": k, "fits": fits,
                                    "summary": summary, "s_values": s_values,
                                    "lambdas": [float(x) for x in r["lambdas"]],
                                    "gradient_groups": {g: 100 for g in RAY_GROUP_SHARES}})


def _slice_loss(kind: str, seed: int, k: int, a: float, b: float) -> float:
    """L on slice k of a seed: around θ₀ a valley whose tilt differs by slice; trained, a bowl."""
    if kind == "init":
        return (6.25 + 0.01 * seed + 1.6 * (a - (0.8 - 0.1 * k) * b) ** 2 + 0.05 * (a + b) ** 2
                + 0.1 * math.sin(3 * a) * math.cos(2 * b))
    return 3.0 + 0.01 * seed + 1.2 * a * a + (1.0 + 0.05 * k) * b * b + 0.2 * a * b


def write_surface(root: Path, params: Mapping, lam: float, loss=_slice_loss) -> None:
    """surface.csv and surface.json of λ: every kind of landscape.centers × every seed × every slice,
    L = ``loss(kind, seed, slice, a, b)``; ‖θ₀ + aδ₁ + bδ₂‖² = ‖θ₀‖²(1 + a² + b²) (orthogonal
    directions of θ₀'s norm)."""
    la, seeds = params["landscape"], [int(x) for x in params["train"]["seeds"]]
    g = np.linspace(-la["span"], la["span"], int(la["grid"]))
    theta_sq = 380.0
    rows, centres = [], []
    for kind in la["centers"]:
        step = 0 if kind == "init" else int(params["train"]["steps"])
        for seed in seeds:
            per_slice = []
            for k in range(int(la["slices"])):
                part = [{"center": kind, "seed": seed, "slice": k, "a": a, "b": b, "loss": loss(kind, seed, k, a, b),
                         "theta_sq": theta_sq * (1 + a * a + b * b)} for a in g for b in g]
                table = pd.DataFrame(part).assign(F=lambda d: d["loss"] + 0.5 * lam * d["theta_sq"])
                rows.append(table)
                imin = int(table["F"].idxmin())
                per_slice.append({"directions": {"norms": [19.5, 19.5], "cosine": 0.0}, "F_min": float(table["F"][imin]),
                                  "F_max": float(table["F"].max()),
                                  "argmin": {"a": float(table["a"][imin]), "b": float(table["b"][imin])}})
            loss0 = loss(kind, seed, 0, 0.0, 0.0)
            sha = f"{seed:064x}" if kind == "init" else f"{zlib.crc32(f'{lam}/{seed}'.encode()):064x}"
            centres.append({"kind": kind, "variant": "adamw", "lam": lam, "seed": seed, "step": step,
                            "weights_sha256": sha, "theta0_sq_norm": theta_sq, "loss_center": loss0,
                            "F_center": loss0 + 0.5 * lam * theta_sq, "direction_seed": int(la["seed"]) * 1_000_003 + seed,
                            "per_slice": per_slice})
    d = layout.fmt(layout.LANDSCAPE_DIR, root, dataset=params["data"]["name"], lam=lam)
    table = pd.concat(rows, ignore_index=True)
    tables.write("surface", d / "surface.csv", table)
    _write_json(d / "surface.json", {"dataset": params["data"]["name"], "lam": lam, "d": D, "centres": centres,
                                     "directions": {"kind": "filter-normalised Gaussian", "seed": int(la["seed"])},
                                     "span": la["span"], "grid": la["grid"], "levels": la["levels"],
                                     "axis": g.tolist(), "slices": int(la["slices"]), "evaluations": len(table)})


def write_cost(root: Path, params: Mapping) -> None:
    rows = []
    for h in params["figures"]["model_sizes"]:
        d = 512 * h + 64 * h + 2 * (12 * h * h + 13 * h) + 2 * h
        rows.append({"hidden_size": h, "num_layers": 2, "num_heads": 4, "intermediate_size": 4 * h, "d": d,
                     "tokens": 16 * 64, "seconds_hvp": 2e-7 * d ** 0.95, "seconds_hvp_fresh": 3e-7 * d ** 0.95,
                     "seconds_grad": 7e-8 * d ** 0.95, "peak_memory_bytes": 40 * d + 3_000_000,
                     "memory_source": "torch allocation events (torch.profiler)", "device": "cpu",
                     "method": "double_backward", "repeats": 3, "torch": "2.13.0+cpu"})
    tables.write("hvp_cost", layout.fmt(layout.COST_CSV, root, dataset=params["data"]["name"]), pd.DataFrame(rows))
