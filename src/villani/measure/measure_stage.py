r"""One checkpoint's curvature measurement (SPEC §2): ``measure/step{step}.json`` + ``.parquet``.

At θ of checkpoint (variant, λ, seed, step), in eval mode and float32, on the fixed
measurement set (:mod:`villani.measure.measurement_set`):

- exact: ‖θ‖², L, F = L + (λ/2)‖θ‖², ∇L (accumulated over micro-batches),
  ‖∇L‖², ∇F = ∇L + λθ, ‖∇F‖² — all from the operator's objective
  (:meth:`~villani.curvature.HessianOperator.objective`: the operator is
  :class:`~villani.curvature.ModelHessian` at the run's λ, every parameter decayed, SPEC §1) —
  and the validation loss over the *whole* validation split;
- the spectrum of ∇²F = ∇²L + λI (that operator): the
  top-k Ritz values with residuals from one Lanczos run of ``measure.lanczos_steps`` from
  probe 0 (:func:`~villani.curvature.top_eigenvalues`; with ``measure.lanczos_tol`` it
  stops once the top-k relative residuals are under it), which is also the first start
  of the SLQ density (:func:`~villani.curvature.slq` with ``first=``; starts 1.. run
  ``slq_steps`` each: ``slq_probes`` of them where the full density is asked, else the
  fewest that ``measure.slq_cdf_tol`` needs, :func:`~villani.curvature.slq_num_starts`);
  λ_median with its interval, λ_max/λ_median;
- tr ∇²L, ΔF's only stochastic part (ΔF = tr ∇²L + λd with λd exact; for Rademacher v
  vᵀ∇²F v = vᵀ∇²L v + λd, so the trace statistics are those of ∇²L, and its products are
  those of :meth:`~villani.curvature.HessianOperator.data_hessian`): with
  ``measure.trace_estimator: deflated`` tr(QᵀHQ) exactly from that Lanczos run's basis Q
  (no further product) plus Hutchinson on the remainder with probes 1, 2, … of
  ``measure.probe_seed`` (probe 0 built Q); with ``hutchinson`` plain probes 0, 1, ….
  ``measure.num_probes`` of them, or — with ``measure.trace_rel_ci`` / ``psi_rel_ci`` —
  as many as Stein's two-stage rule asks after ``measure.min_probes``
  (:mod:`villani.curvature.trace.two_stage`). The same probes at every checkpoint and λ;
- from the same products: per-tensor and per-group traces, the unbiased ‖∇²L‖_F² and
  Σ(∇²L)_ii² (and, deflated, the remainder's, which predict this estimator's variance;
  SPEC §5);
- Ψ_s = −ΔF + ‖∇F‖²/s for every s in ``measure.s_values``;
- with ``measure.spectrum_every`` = n > 1 (:func:`villani.plan.schedule.spectrum_at`)
  the top-k run, the SLQ density and the deflation only at every n-th checkpoint and the
  last; elsewhere plain Hutchinson for the trace and null spectrum fields — or, with
  ``measure.ds_blocks``, the doubly stochastic trace (:func:`villani.measure.curvature_phase.ds_curvature`: groups of
  ``probe_block`` probes on fresh samples of ``ds_blocks`` measurement blocks; no ‖∇²L‖_F²);
- the trace products at ``measure.precision`` and the job's audit of it, ``precision_audit``
  (:mod:`villani.measure.precision_audit`: a few products recomputed at fp32 "highest" —
  in bf16 when the job's were "highest" — their error against the trace's standard error;
  a failed audit below "highest" recomputes the trace there); everything else fp32 "highest";
- ``cost``: the products, graph builds and tokens spent (:mod:`villani.measure.cost_model`);
- at the first and the last checkpoint only: the minibatch gradient-noise σ²
  (:mod:`villani.measure.grad_noise`).

The Parquet file holds the raw samples (long format: ``kind, probe, index, block,
value, weight``) and is written first; the JSON is written last and marks completion.
The JSON names what it was computed from — ``weights_sha256`` and ``checkpoint_meta_sha256``
(the checkpoint's weights and ``checkpoint.json``), ``train_digest``/``train_params`` (the
parameters it was trained under), ``measure_digest`` (the measure keys) — and carries its
own ``record_sha256`` (:mod:`villani.io.records`); the readers check each link
(:mod:`villani.io.results`). One process measures a checkpoint at a time
(:mod:`villani.io.one_writer`), and not while a ``villani train`` is rewriting it.
A non-finite value anywhere raises ``ValueError`` naming the checkpoint and the
quantity, and nothing is written. Keys of the JSON: ``docs/measurements.md``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from villani.curvature import ModelHessian, Objective
from villani.data import load_split
from villani.io import atomic, tables
from villani.io.finite import check_finite
from villani.io.one_writer import WriterBusy, describe, holder, one_writer
from villani.io.records import write_sealed
from villani.io.results import data_stats, vocabulary
from villani.measure.cost_model import cost_counts
from villani.measure.curvature_phase import Clock, curvature
from villani.measure.grad_noise import gradient_noise
from villani.measure.measurement_set import (
    mean_token_loss,
    measurement_batches,
    train_blocks,
)
from villani.measure.parameter_groups import group_columns
from villani.model.causal_lm import num_params
from villani.plan import layout
from villani.plan.budget import budget
from villani.plan.digest import stage_digest, stage_inputs
from villani.plan.frozen import Params
from villani.plan.runs import Run
from villani.plan.schedule import checkpoint_steps
from villani.runtime.progress import Progress
from villani.diagnostics.psi import psi_key, psi_s, psi_s_interval
from villani.statistics.samples import predicted_cv, sample_stats
from villani.training.checkpoint import load_run_model

__all__ = ["measure_checkpoint", "SCHEMA_VERSION", "NOTE"]

log = logging.getLogger(__name__)

# /2: the `cost` object (counts of products, graph builds, tokens); /3: `precision_audit`;
# /4: provenance (checkpoint_meta_sha256, train_digest, train_params, measure_digest) and record_sha256
SCHEMA_VERSION = "villani.measure/4"
NOTE = ("trace_L estimates tr ∇²L, ΔF's only stochastic part (Hutchinson with Rademacher probes, deflated: "
        "tr(QᵀHQ) exact from the top-k Lanczos basis plus Hutchinson on the remainder); "
        "lam_d = λ·d is exact and laplacian_F = trace_L.mean + lam_d; psi_s[s] = −laplacian_F + "
        "grad_F_sq_norm/s; top_eigenvalues, lambda_median and the SLQ nodes are of ∇²F = ∇²L + λI")
ESTIMATOR_NAMES = {"hutchinson": "hutchinson (Rademacher)",
                   "deflated": "deflated hutchinson (Rademacher, Lanczos basis)",
                   "doubly_stochastic": "doubly stochastic hutchinson (Rademacher, fresh measurement blocks per group)"}


def _trace_block(est, names: list[str], model_type: str) -> tuple[dict, dict, dict, np.ndarray, list[str]]:
    """Per-tensor means, per-group means/stderr, and the (M, groups) group samples."""
    tensor = {n: float(est.block_means[n]) for n in names}
    groups = group_columns(list(est.block_names), model_type)
    gnames = list(groups)
    gs = np.stack([est.block_samples[:, cols].sum(axis=1) for cols in groups.values()], axis=1)
    means = {g: float(gs[:, j].mean()) for j, g in enumerate(gnames)}
    errs = {g: sample_stats(gs[:, j]).stderr for j, g in enumerate(gnames)}
    return tensor, means, errs, gs, gnames


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _predicted_cv(est, mean: float) -> float | None:
    """Predicted CV of this estimator's mean: √(predicted_var)/(√M |tr|) (deflated: the remainder's)."""
    var = est.predicted_var
    if var is None or mean == 0:
        return None
    return math.sqrt(max(var, 0.0)) / (math.sqrt(est.num_probes) * abs(mean))


def _samples_frame(est, gs, gnames, top, density, lam_d: float, noise: dict | None, ds=None) -> pd.DataFrame:
    rows: list[dict] = []
    M = est.num_probes

    def add(kind, values, probe=None, index=None, block=None, weight=None):
        n = len(values)
        rows.append(pd.DataFrame({
            "kind": kind,
            "probe": np.arange(n) if probe is None else probe,
            "index": np.zeros(n, dtype=np.int64) if index is None else index,
            "block": block if block is not None else None,
            "value": np.asarray(values, dtype=np.float64),
            "weight": np.full(n, np.nan) if weight is None else np.asarray(weight, dtype=np.float64),
        }))

    add("trace_L", est.samples)
    add("trace_F", est.samples + lam_d)
    if est.frob_sq_samples is not None:
        add("frob_sq_L", est.frob_sq_samples)
    probes = np.repeat(np.arange(M), len(gnames))
    add("group_trace", gs.ravel(), probe=probes, block=np.tile(np.asarray(gnames, dtype=object), M))
    tn = list(est.block_names)
    add("tensor_trace", est.block_samples.ravel(), probe=np.repeat(np.arange(M), len(tn)),
        block=np.tile(np.asarray(tn, dtype=object), M))
    if density is not None:
        for j, (nodes, w) in enumerate(zip(density.nodes, density.weights)):
            add("slq_node", nodes, probe=np.full(len(nodes), j), index=np.arange(len(nodes)), weight=w)
        add("slq_trace_F", density.trace_samples)
    if top is not None:
        add("top_eigenvalue", top.values, probe=np.zeros(len(top.values), dtype=np.int64),
            index=np.arange(len(top.values)), weight=top.residuals)
    if ds is not None:  # the raw vᵀH_Bv of each group (index) and the measurement blocks it drew
        J, k = ds.samples.shape
        add("ds_sample", ds.samples.ravel(), probe=np.tile(np.arange(k), J), index=np.repeat(np.arange(J), k))
        add("ds_group_block", ds.blocks.ravel(), probe=np.tile(np.arange(ds.blocks.shape[1]), J),
            index=np.repeat(np.arange(J), ds.blocks.shape[1]))
    if noise is not None:
        add("grad_noise_batch_sq_norm", noise["grad_sq_norms"])
    df = pd.concat(rows, ignore_index=True)
    df["block"] = df["block"].astype("string")
    df["weight"] = df["weight"].astype("float64")
    return df


def measure_checkpoint(params: Params, *, variant: str, lam: float, seed: int, step: int, root="results",
                       device: str | None = None) -> str:
    """Measure checkpoint ``step`` of run (``params.data.name``, variant, λ, seed); write its
    Parquet then its JSON; return the JSON path.

    Progress lines (:class:`villani.runtime.progress.Progress`, unit HVP): the phase, HVPs done of
    the most the job can take (:func:`villani.plan.budget.budget` with a spectrum and every
    SLQ start: before d is known; each phase replaces it by what is then known: the
    checkpoint's budget, the Lanczos steps taken, the probes Stein's rule asked for), seconds per HVP, the running trace estimate and its CI (Hutchinson) or
    largest Ritz value (Lanczos), and the ETA.
    """
    me, run = params.measure, Run(params.data.name, variant, lam, seed)
    what = f"measure {run.dataset} {variant} λ={layout.format_lam(lam)} seed={seed} step={step}"
    hvps = budget(me, spectrum=True, slq_starts=me.slq_probes).total
    out = run.path(layout.MEASURE_JSON, root, step=step)
    with one_writer(run.path(layout.MEASURE_LOCK, root, step=step), f"the measurement {out}", writes=str(out)):
        _refuse_while_trained(root, run, step)
        with Progress(what, hvps, unit="HVP", logger=log) as bar:
            return _measure(params, run=run, step=step, root=root, device=device, bar=bar)


def _refuse_while_trained(root, run: Run, step: int) -> None:
    """One line when a live ``villani train`` of the run is rewriting checkpoint ``step``."""
    info = holder(run.path(layout.TRAIN_LOCK, root))
    steps = (info or {}).get("steps")
    if info is not None and (not isinstance(steps, list) or steps[0] <= step <= steps[-1]):
        raise WriterBusy(f"{run.path(layout.CKPT_DIR, root, step=step)}: being written by another process "
                         f"({describe(info)}); measure it once that training ends")


def _load(params: Params, run: Run, step: int, root, device, clock: Clock) -> dict:
    """Model, measurement batches and the validation loss of one checkpoint."""
    me = params.measure
    clock.start("load")
    model, meta = load_run_model(params, root, run, step, device)
    meta_sha256 = atomic.sha256_file(run.path(layout.CKPT_META, root, step=step))
    dev = next(model.parameters()).device
    train = train_blocks(params, root)
    ids, batches = measurement_batches(params, root, dev, train=train)
    clock.lap("load")
    clock.start("validation")
    val = load_split(params, root, "validation")
    val_loss, val_tokens = mean_token_loss(model, [b.to(dev) for b in val.split(me.batch_size)])
    clock.lap("validation")
    return dict(model=model, meta=meta, meta_sha256=meta_sha256, dev=dev, train=train, ids=ids, batches=batches,
                val_loss=val_loss, val_tokens=int(val_tokens), root=root)


def _first_order(H: ModelHessian, where: str) -> Objective:
    """F, ∇F and the L-quantities at θ from the operator's objective (its λ), checked finite."""
    obj = H.objective()
    check_finite(obj.loss_L, where, "loss")
    check_finite(_first_fields(obj), where)
    return obj


def _first_fields(obj: Objective) -> dict:
    """The record's exact first-order fields (all float64 sums)."""
    return {"theta_sq_norm": obj.theta_sq, "loss": obj.loss_L, "F": obj.F, "grad_L_sq_norm": obj.grad_L_sq,
            "grad_F_sq_norm": obj.grad_F_sq, "theta_dot_grad_L": obj.theta_dot_grad_L}


def _measure(params: Params, *, run: Run, step: int, root, device, bar: Progress) -> str:
    clock = Clock(bar)
    steps = checkpoint_steps(params.train)
    if step not in steps:
        raise ValueError(f"--step: {step} is not a checkpoint step of this run ({steps})")
    ckpt = run.path(layout.CKPT_DIR, root, step=step)
    where = f"{ckpt}"
    job = _load(params, run, step, root, device, clock)
    check_finite(job["val_loss"], where, "val_loss")
    clock.start("gradient")
    me, model, batches = params.measure, job["model"], job["batches"]
    H = ModelHessian(model, batches, lam=run.lam, method=me.hvp_method)  # ∇²F at the run's λ
    obj = _first_order(H, where)
    clock.lap("gradient")
    # the trace is of ∇²L (ΔF = tr ∇²L + λd, λd exact): cheaper-precision and block operators of it
    hessian_L_at = lambda prec: ModelHessian(model, batches, lam=run.lam, method=me.hvp_method,  # noqa: E731
                                             reuse_graph=H.graph_kept, precision=prec).data_hessian()
    rows = torch.cat(batches)
    blocks_hessian_L = lambda idx, prec: ModelHessian(  # noqa: E731
        model, list(rows[idx].split(me.batch_size)), lam=run.lam, method=me.hvp_method, reuse_graph=H.graph_kept,
        precision=prec).data_hessian()
    cur = curvature(me, H, step, steps, obj.grad_F_sq, clock, where, hessian_L_at, model.config.model_type,
                    blocks_hessian_L, int(rows.shape[0]))
    noise = None
    if step in (steps[0], steps[-1]):
        clock.start("grad_noise")
        noise = gradient_noise(model, job["train"], me, params.train, job["dev"])
        clock.lap("grad_noise")
    rec = _record(params, run, step, str(ckpt), job, H, obj, cur, noise)
    tensor_tr, group_tr, group_err, gs, gnames = _trace_block(cur["est"], H.names, model.config.model_type)
    rec.update(block_traces=group_tr, block_traces_stderr=group_err, tensor_traces=tensor_tr)
    frame = _samples_frame(cur["est"], gs, gnames, cur["top"], cur["density"], rec["lam_d"], noise, cur.get("ds"))
    check_finite(rec, where)
    check_finite(frame["value"].to_numpy(), where, "samples")
    rec["seconds"] = clock.total()
    # forward + first backward of every graph build, inside the phases above
    rec["seconds_breakdown"] = {**clock.laps, "of_which_hvp_graph_build": round(cur["build_seconds"], 4)}
    out_json = run.path(layout.MEASURE_JSON, root, step=step)
    out_pq = run.path(layout.MEASURE_PARQUET, root, step=step)
    tables.write("measure_samples", out_pq, frame)
    write_sealed(out_json, rec, "measure")
    return str(out_json)


def _trace_fields(me: Params, cur: dict, st, ci) -> dict:
    """The ``trace_L`` object: the estimate of tr ∇²L, its CI, and how it was made."""
    est, deflate, ds = cur["est"], cur["deflate"], cur.get("ds")
    out = {
        "mean": st.mean, "std": st.std, "stderr": st.stderr, "ci95": list(ci) if ci else None,
        "cv": st.cv, "rel_stderr": st.rel_stderr, "shapiro_p": st.shapiro_p,
        "frob_sq": None if est.frob_sq is None else float(est.frob_sq),
        "diag_sq": None if est.diag_sq is None else float(est.diag_sq),
        "num_probes": est.num_probes, "probe_seed": cur["seed_p"], "first_probe": 1 if deflate else 0,
        "estimator": ESTIMATOR_NAMES["deflated" if deflate else "hutchinson"],
        "deflation_rank": est.deflation_rank, "exact_part": est.exact_part,
        "remainder_frob_sq": est.remainder_frob_sq, "remainder_diag_sq": est.remainder_diag_sq,
        "max_probes": est.max_probes,
        "min_probes": me.min_probes if est.target_half_width is not None else None,
        "target_half_width": est.target_half_width,
        "ci_rule": "t" if est.target_half_width is None else "stein two-stage",
        "doubly_stochastic": None,
    }
    if ds is not None:  # the samples above are the J group means; probes count products
        k = ds.probes_per_group
        out.update(num_probes=ds.num_matvecs, max_probes=ds.max_groups * k, first_probe=None,
                   estimator=ESTIMATOR_NAMES["doubly_stochastic"],
                   min_probes=None if ds.pilot is None else ds.pilot * k,
                   doubly_stochastic={"groups": ds.num_groups, "probes_per_group": k,
                                      "blocks_per_group": ds.blocks_per_group, "n_blocks": ds.n_blocks,
                                      "max_groups": ds.max_groups, "pilot_groups": ds.pilot,
                                      "between_var": _finite_or_none(ds.between_var),
                                      "within_var": _finite_or_none(ds.within_var)})
    return out


def _spectrum_fields(me: Params, cur: dict) -> dict:
    """Top-k Ritz values and residuals, λ_median with its interval, the Lanczos and SLQ settings
    (all null at a checkpoint without a spectrum)."""
    top, density = cur["top"], cur["density"]
    if top is None:
        return dict.fromkeys(("top_eigenvalues", "top_residuals", "lambda_max", "lambda_median", "lambda_median_ci95",
                              "spectral_ratio", "lanczos", "slq"), None) | {"spectrum_of": "hessian_F"}
    lam_max, lam_med = float(top.values[0]), float(density.quantile(0.5))
    med_lo, med_hi = density.quantile_interval(0.5)
    return {
        "spectrum_of": "hessian_F",
        "top_eigenvalues": top.values.tolist(),
        "top_residuals": top.residuals.tolist(),
        "lambda_max": lam_max,
        "lambda_median": lam_med,
        "lambda_median_ci95": [_finite_or_none(med_lo), _finite_or_none(med_hi)],
        "spectral_ratio": lam_max / lam_med if lam_med > 0 else None,
        "lanczos": {"steps": int(top.lanczos.num_steps), "max_steps": me.lanczos_steps,
                    "tol": me.lanczos_tol,
                    "max_rel_residual": float(np.max(top.residuals / np.maximum(np.abs(top.values), 1e-300)))},
        "slq": {"num_probes": int(density.num_probes), "max_probes": me.slq_probes,
                "cdf_tol": me.slq_cdf_tol, "full_density": cur["full_density"],
                "steps_first": int(top.lanczos.num_steps), "steps": me.slq_steps,
                "trace_F_samples": density.trace_samples.tolist(), "breakdown": bool(density.breakdown)},
    }


def _record(params: Params, run: Run, step: int, ckpt: str, job: dict, H: ModelHessian, obj: Objective, cur: dict,
            noise: dict | None) -> dict[str, Any]:
    """The measure JSON (keys: docs/measurements.md), without the per-block traces and timings."""
    me, meta, est = params.measure, job["meta"], cur["est"]
    lam, d = run.lam, H.dim
    st = sample_stats(est.samples)
    ci = est.ci95 if est.num_probes >= 2 else None  # t-based, or Stein's with a CI target
    lam_d, gF_sq = lam * d, obj.grad_F_sq
    products = cur["products"]
    noise_tokens = 0 if noise is None else noise["num_batches"] * noise["batch_size"] * (job["batches"][0].shape[1] - 1)
    return {
        "schema": SCHEMA_VERSION,
        "dataset": run.dataset, "variant": run.variant, "lam": lam, "seed": run.seed, "step": step,
        "checkpoint": ckpt, "weights_sha256": meta["weights_sha256"], "checkpoint_meta_sha256": job["meta_sha256"],
        "train_digest": meta.get("digest"), "train_params": meta.get("train_params"),
        "measure_digest": stage_digest(params, "measure", run.variant),
        "measure_params": stage_inputs(params, "measure", run.variant),
        "tokens_seen": int(meta["tokens_seen"]), "wall_clock_s": float(meta["wall_clock_s"]),
        "train_loss": meta.get("train_loss"), "decay_mode": meta.get("decay_mode"),
        "decay_params": meta.get("decay_params"),
        "d": d, "d_check": int(num_params(job["model"])), "vocab_size": vocabulary(data_stats(params, job["root"]))[0],
        "measurement_set": {"blocks": len(job["ids"]), "set_seed": me.set_seed, "num_tokens": int(H.num_tokens),
                            "batch_size": me.batch_size, "ids": job["ids"].tolist()},
        **_first_fields(obj),
        "val_loss": job["val_loss"], "val_ppl": math.exp(job["val_loss"]), "val_tokens": job["val_tokens"],
        "s_values": list(me.s_values),
        "trace_L": _trace_fields(me, cur, st, ci),
        "lam_d": lam_d,
        "laplacian_F": st.mean + lam_d,
        "laplacian_F_ci95": None if ci is None else [ci[0] + lam_d, ci[1] + lam_d],
        "psi_s": {psi_key(s): psi_s(st.mean, gF_sq, lam, d, s) for s in me.s_values},
        "psi_s_ci95": None if ci is None else {
            psi_key(s): psi_s_interval(ci, gF_sq, lam, d, s) for s in me.s_values},
        "predicted_cv": _predicted_cv(est, st.mean),
        "predicted_cv_plain": None if est.frob_sq is None else predicted_cv(
            est.frob_sq, st.mean, est.num_probes, None if est.diag_sq is None else max(float(est.diag_sq), 0.0)),
        "predicted_cv_bound": None if est.frob_sq is None else predicted_cv(est.frob_sq, st.mean, est.num_probes),
        **_spectrum_fields(me, cur),
        "hvp_count": products,
        "cost": cost_counts(cur["spent"], int(H.num_tokens), graph_kept=cur["graph_kept"], noise_tokens=noise_tokens,
                            val_tokens=job["val_tokens"], hutchinson_products=cur["hutchinson_products"],
                            hutchinson_calls=cur["hutchinson_calls"], kept_builds=cur["kept_builds"],
                            subset=cur.get("subset")),
        "hvp_method": me.hvp_method,
        "precision": cur["precision_audit"]["used"],
        "precision_audit": cur["precision_audit"],
        "grad_noise_sigma_sq": None if noise is None else noise["sigma_sq"],
        "grad_noise": None if noise is None else {k: noise[k] for k in ("num_batches", "batch_size", "mean_grad_sq_norm")},
        "device": job["dev"].type,
        "torch_version": torch.__version__,
        "note": NOTE,
    }
