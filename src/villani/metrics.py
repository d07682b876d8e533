"""``results/metrics.json``: the headline numbers DVC tracks across versions.

Per λ (plain runs, averaged over seeds): final training loss, final ‖θ‖², tokens seen,
training wall-clock; measurement-based numbers (validation perplexity, Ψ_s, trace, λ_max)
from :func:`villani.measure.summary.measurement_metrics`; PAC-Bayes tightness from the
bounds table (:func:`bounds_metrics`).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from villani import atomic, layout
from villani.runs import checkpoint_table, runs


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
    """PAC-Bayes tightness per λ from ``bounds.json`` (:func:`villani.bounds_table.tightness`):
    mean and final bound/perplexity ratio, R², and how many checkpoints were KL-clamped or
    vacuous; ``"undefined"`` for λ = 0. Empty when the bounds stage has not run."""
    from villani.readers import bounds_summary

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


def write_metrics(params: Mapping, root=layout.RESULTS) -> str:
    from villani.measure.summary import measurement_metrics

    metrics = {"dataset": params["data"]["name"], "training": training_metrics(params, root)}
    metrics.update(measurement_metrics(params, root))
    metrics.update(bounds_metrics(params, root))
    path = layout.fmt(layout.METRICS, root)
    atomic.write_json(path, metrics)
    return str(path)
