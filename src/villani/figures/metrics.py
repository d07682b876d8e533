"""``results/metrics/{dataset}.json``: the headline numbers DVC tracks across versions.

Per λ (plain runs, averaged over seeds): final training loss, final ‖θ‖², tokens seen,
training wall-clock; measurement-based numbers (validation perplexity, Ψ_s, trace, λ_max)
(:func:`measurement_metrics`); PAC-Bayes tightness from the bounds table
(:func:`bounds_metrics`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from villani.io import atomic
from villani.io.results import bounds_summary, checkpoint_table, measurements
from villani.plan import layout
from villani.plan.runs import runs


def training_metrics(params: Mapping, root) -> dict:
    out: dict = {}
    for r in runs(params):
        last = checkpoint_table(params, r, root).iloc[-1]
        key = f"{r.variant}/lam={layout.format_lam(r.lam)}"
        out.setdefault(key, []).append({
            "train_loss": float(last["train_loss"]), "theta_sq_norm": float(last["theta_sq_norm"]),
            "tokens_seen": int(last["tokens_seen"]), "train_seconds": float(last["wall_clock_s"]),
        })
    return {k: {m: float(np.mean([v[m] for v in vals])) for m in vals[0]} for k, vals in out.items()}


def bounds_metrics(params: Mapping, root) -> dict:
    """PAC-Bayes tightness per λ from ``bounds.json`` (:func:`villani.bounds.table.tightness`):
    mean and final bound/perplexity ratio, R², and how many checkpoints were KL-clamped or
    vacuous; ``"undefined"`` for λ = 0. Empty when the bounds stage has not run."""
    try:
        summary = bounds_summary(params, root)["summary"]
    except ValueError:
        return {}
    out: dict = {}
    for lam, entry in summary.items():
        pb = entry["pac_bayes"]
        out[f"lam={lam}"] = pb if isinstance(pb, str) else {
            k: pb[k] for k in ("mean_ratio", "final_ratio", "r2", "n_checkpoints", "n_kl_clamped", "n_vacuous")}
    return {"pac_bayes": out}


def _mean(values) -> float | None:
    vals = [float(v) for v in values if v is not None and np.isfinite(float(v))]
    return float(np.mean(vals)) if vals else None


def measurement_metrics(params: Mapping, root=layout.RESULTS) -> dict:
    """Headline numbers per λ at the last checkpoint of the plain runs, mean over seeds.

    ``{"measurement": {"lam=<λ>": {val_ppl, psi_s=<s>…, trace_L, laplacian_F, lam_d,
    lambda_max, spectral_ratio, grad_noise_sigma_sq, n_seeds}}}``: means over the seeds whose
    value is defined (``None`` when none is, e.g. the ratio for λ_median ≤ 0); λ with no
    measurement yet are left out.
    """
    df = measurements(params, root, missing_ok=True)
    out: dict = {}
    if df.empty:
        return {"measurement": out}
    last = df[df["step"] == int(params["train"]["steps"])]
    psi_cols = [c for c in df.columns if c.startswith("psi_s=") and "_ci95" not in c]
    for lam, g in last.groupby("lam"):
        entry = {"val_ppl": _mean(g["val_ppl"]), "trace_L": _mean(g["trace_L_mean"]),
                 "laplacian_F": _mean(g["laplacian_F"]), "lam_d": _mean(g["lam_d"]),
                 "lambda_max": _mean(g["lambda_max"]), "spectral_ratio": _mean(g["spectral_ratio"]),
                 "grad_noise_sigma_sq": _mean(g["grad_noise_sigma_sq"]), "n_seeds": int(g["seed"].nunique())}
        entry.update({c: _mean(g[c]) for c in psi_cols})
        out[f"lam={layout.format_lam(lam)}"] = entry
    return {"measurement": out}


def write_metrics(params: Mapping, root=layout.RESULTS) -> str:
    metrics = {"dataset": params["data"]["name"], "training": training_metrics(params, root)}
    metrics.update(measurement_metrics(params, root))
    metrics.update(bounds_metrics(params, root))
    path = layout.fmt(layout.METRICS, root, dataset=params["data"]["name"])
    atomic.write_json(path, metrics)
    return str(path)
