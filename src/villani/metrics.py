"""``results/metrics.json``: the headline numbers DVC tracks across versions.

Per λ (plain runs, averaged over seeds): final training loss, final ‖θ‖², tokens seen,
training wall-clock. Measurement-based numbers (validation perplexity, Ψ_s, trace,
λ_max, PAC-Bayes tightness) are added by :func:`measurement_metrics` when present.
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


def write_metrics(params: Mapping, root=layout.RESULTS) -> str:
    metrics = {"dataset": params["data"]["name"], "training": training_metrics(params, root)}
    try:
        from villani.measure.summary import measurement_metrics
    except ImportError:
        measurement_metrics = None
    if measurement_metrics is not None:
        metrics.update(measurement_metrics(params, root))
    path = layout.fmt(layout.METRICS, root)
    atomic.write_json(path, metrics)
    return str(path)
