"""Readers of the measurements: a DataFrame for figures and tables, headline metrics.

:func:`load_measurements` returns one row per measured checkpoint with flat columns:

- identity: ``dataset, variant, lam, seed, step, path``;
- every scalar of the JSON (``d, theta_sq_norm, loss, F, val_loss, val_ppl,
  grad_L_sq_norm, grad_F_sq_norm, lam_d, laplacian_F, lambda_max, lambda_median,
  spectral_ratio, predicted_cv, predicted_cv_bound, grad_noise_sigma_sq, hvp_count,
  seconds, tokens_seen, wall_clock_s, train_loss, …``);
- ``trace_L_<field>`` for ``mean, std, stderr, cv, rel_stderr, shapiro_p, frob_sq,
  diag_sq, num_probes`` and ``trace_L_ci95_lo/hi``;
- ``psi_s=<s>`` (s as ``str(float(s))``) and ``psi_s=<s>_ci95_lo/hi``;
- ``block:<group>`` per parameter group (mean block trace);
- list columns ``top_eigenvalues`` and ``top_residuals`` (largest first).

:func:`load_samples` reads a checkpoint's Parquet (raw Hutchinson samples, SLQ nodes,
…), optionally one ``kind``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from villani import atomic, layout
from villani.runs import runs
from villani.schedule import checkpoint_steps

__all__ = ["load_measurements", "load_samples", "measurement_metrics", "measure_paths"]

_SCALARS = ("d", "theta_sq_norm", "loss", "F", "val_loss", "val_ppl", "val_tokens", "grad_L_sq_norm",
            "grad_F_sq_norm", "theta_dot_grad_L", "lam_d", "laplacian_F", "lambda_max", "lambda_median",
            "spectral_ratio", "predicted_cv", "predicted_cv_bound", "grad_noise_sigma_sq", "hvp_count", "seconds",
            "tokens_seen", "wall_clock_s", "train_loss", "decay_mode", "decay_params", "spectrum_of")
_TRACE = ("mean", "std", "stderr", "cv", "rel_stderr", "shapiro_p", "frob_sq", "diag_sq", "num_probes")


def measure_paths(params: Mapping, root=layout.RESULTS, variants: Iterable[str] = ("adamw",)):
    """(run, step, json path) of every checkpoint measurement the params define."""
    for r in runs(params, tuple(variants)):
        for s in checkpoint_steps(params["train"]):
            yield r, s, r.path(layout.MEASURE_JSON, root, step=s)


def _flat(m: Mapping, path) -> dict:
    row = {k: m.get(k) for k in ("dataset", "variant", "lam", "seed", "step")}
    row["path"] = str(path)
    row.update({k: m.get(k) for k in _SCALARS})
    tr = m.get("trace_L") or {}
    row.update({f"trace_L_{k}": tr.get(k) for k in _TRACE})
    ci = tr.get("ci95") or [None, None]
    row["trace_L_ci95_lo"], row["trace_L_ci95_hi"] = ci
    for s, v in (m.get("psi_s") or {}).items():
        row[f"psi_s={s}"] = v
        lo, hi = ((m.get("psi_s_ci95") or {}).get(s) or [None, None])
        row[f"psi_s={s}_ci95_lo"], row[f"psi_s={s}_ci95_hi"] = lo, hi
    for g, v in (m.get("block_traces") or {}).items():
        row[f"block:{g}"] = v
    row["top_eigenvalues"] = list(m.get("top_eigenvalues") or [])
    row["top_residuals"] = list(m.get("top_residuals") or [])
    return row


def load_measurements(params: Mapping, root=layout.RESULTS, *, variants: Iterable[str] = ("adamw",),
                      missing_ok: bool = False) -> pd.DataFrame:
    """One row per measured checkpoint (see the module docstring), sorted by variant, λ, seed, step.

    A missing measurement is a one-line ``ValueError`` naming it, unless ``missing_ok``
    (then it is skipped).
    """
    rows = []
    for _, _, path in measure_paths(params, root, variants):
        if not path.exists():
            if missing_ok:
                continue
            raise ValueError(f"{path}: measurement not found (run `villani measure` for it)")
        rows.append(_flat(atomic.read_json(path, "measurement"), path))
    if not rows:
        return pd.DataFrame(columns=["dataset", "variant", "lam", "seed", "step", "path"])
    df = pd.DataFrame(rows)
    return df.sort_values(["variant", "lam", "seed", "step"]).reset_index(drop=True)


def load_samples(params: Mapping, root=layout.RESULTS, *, variant: str = "adamw", lam: float, seed: int, step: int,
                 kind: str | None = None) -> pd.DataFrame:
    """The raw samples of one checkpoint (columns ``kind, probe, index, block, value, weight``).

    Kinds: ``trace_L`` (vᵀ∇²L v per probe), ``trace_F`` (+ λd), ``frob_sq_L`` (‖∇²L v‖²),
    ``group_trace`` / ``tensor_trace`` (per-block v_bᵀ(∇²L v)_b, ``block`` names it),
    ``slq_node`` (node of ∇²F in ``value``, quadrature weight in ``weight``, start vector in
    ``probe``), ``slq_trace_F``, ``top_eigenvalue`` (residual in ``weight``),
    ``grad_noise_batch_sq_norm`` (first/last checkpoint).
    """
    path = layout.fmt(layout.MEASURE_PARQUET, root, dataset=params["data"]["name"], variant=variant, lam=lam,
                      seed=seed, step=step)
    if not path.exists():
        raise ValueError(f"{path}: measurement samples not found")
    df = pd.read_parquet(path)
    return df if kind is None else df[df["kind"] == kind].reset_index(drop=True)


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
    df = load_measurements(params, root, missing_ok=True)
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
