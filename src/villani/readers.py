"""Readers of the files earlier stages wrote, for the bounds table, figures and metrics.

Each reader takes the params and the results root, finds its files through
:mod:`villani.layout` and :mod:`villani.runs`, and returns plain dicts or DataFrames. A
missing or corrupt file is a one-line ``ValueError`` naming it (the CLI prints it).

Measurements are read through :mod:`villani.measure.summary` (the measurement stage's
own readers): :func:`measurements` is its one-row-per-checkpoint DataFrame, and
:func:`run_records` the raw JSON dicts grouped by run, for the bounds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from villani import atomic, layout
from villani.measure.checkpoint_measure import psi_key
from villani.measure.summary import load_measurements, load_samples, measure_paths
from villani.runs import Run


def data_stats(params: Mapping, root) -> dict:
    """``results/data/{dataset}/stats.json``."""
    path = layout.fmt(layout.DATA_STATS, root, dataset=params["data"]["name"])
    return atomic.read_json(path, "data stats")


def train_tokens(stats: Mapping) -> int:
    """Tokens in the train split (the PAC-Bayes n)."""
    try:
        return int(stats["splits"]["train"]["tokens"])
    except (KeyError, TypeError):
        raise ValueError("data stats lack splits.train.tokens") from None


def run_records(params: Mapping, root) -> dict[Run, list[dict]]:
    """The measurement JSON dicts of every plain run, per run in step order (for
    :func:`villani.bounds.run_bounds`, which needs each run's checkpoints together)."""
    out: dict[Run, list[dict]] = {}
    for run, _, path in measure_paths(params, root):
        rec = atomic.read_json(path, "measurement")
        if not isinstance(rec, dict):
            raise ValueError(f"{path}: measurement is not a JSON object")
        out.setdefault(run, []).append(dict(rec, dataset=run.dataset, variant=run.variant, _path=str(path)))
    return out


def psi_column(s: float) -> str:
    """Column of Ψ_s in :func:`measurements` and ``rays.csv``: ``psi_s=<str(float(s))>``."""
    return f"psi_s={psi_key(s)}"


def measurements(params: Mapping, root) -> pd.DataFrame:
    """:func:`villani.measure.summary.load_measurements` (one row per checkpoint of the
    plain runs) plus ``top_k`` and ``lambda_max_residual`` (the Ritz residual of λ_max)."""
    df = load_measurements(params, root)
    df["top_k"] = df["top_eigenvalues"].map(len)
    df["lambda_max_residual"] = df["top_residuals"].map(lambda r: float(r[0]) if len(r) else np.nan)
    for col in df.columns:
        if col.startswith(("trace_L_", "psi_s=")) or col in _NUMERIC:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


_NUMERIC = ("d", "theta_sq_norm", "loss", "F", "val_loss", "val_ppl", "grad_L_sq_norm", "grad_F_sq_norm", "lam_d",
            "laplacian_F", "lambda_max", "lambda_median", "spectral_ratio", "predicted_cv", "predicted_cv_bound",
            "grad_noise_sigma_sq", "tokens_seen", "wall_clock_s")


def eigen_frame(m: pd.DataFrame) -> pd.DataFrame:
    """Long table of the top eigenvalues: lam, seed, step, theta_sq_norm, rank, eigenvalue, residual."""
    rows = []
    for r in m.itertuples():
        res = list(r.top_residuals)
        for i, ev in enumerate(r.top_eigenvalues):
            rows.append({"lam": float(r.lam), "seed": int(r.seed), "step": int(r.step),
                         "theta_sq_norm": float(r.theta_sq_norm), "rank": i + 1, "eigenvalue": float(ev),
                         "residual": float(res[i]) if i < len(res) and res[i] is not None else np.nan})
    return pd.DataFrame(rows, columns=["lam", "seed", "step", "theta_sq_norm", "rank", "eigenvalue", "residual"])


def trace_samples(params: Mapping, run: Run, step: int, root) -> np.ndarray:
    """The M Hutchinson samples vᵀ∇²L v of one checkpoint (kind ``trace_L`` of its Parquet)."""
    df = load_samples(params, root, variant=run.variant, lam=run.lam, seed=run.seed, step=step, kind="trace_L")
    if df.empty:
        raise ValueError(f"{run.path(layout.MEASURE_PARQUET, root, step=step)}: no trace_L samples")
    return df.sort_values("probe")["value"].to_numpy(dtype=float)


def rays_table(params: Mapping, root) -> tuple[pd.DataFrame, dict]:
    """``rays.csv`` and ``slopes.json`` of the dataset."""
    d = Path(layout.fmt(layout.RAYS_DIR, root, dataset=params["data"]["name"]))
    if not (d / "rays.csv").exists():
        raise ValueError(f"{d / 'rays.csv'}: radial-ray samples not found")
    return pd.read_csv(d / "rays.csv"), atomic.read_json(d / "slopes.json", "ray slopes")


def landscape_surface(params: Mapping, lam: float, root) -> tuple[pd.DataFrame, dict]:
    """``surface.csv`` and ``surface.json`` of one λ."""
    d = Path(layout.fmt(layout.LANDSCAPE_DIR, root, dataset=params["data"]["name"], lam=lam))
    if not (d / "surface.csv").exists():
        raise ValueError(f"{d / 'surface.csv'}: loss surface not found")
    return pd.read_csv(d / "surface.csv"), atomic.read_json(d / "surface.json", "surface metadata")


def bounds_summary(params: Mapping, root) -> dict:
    """``bounds.json`` of the dataset (rows and per-λ summary, see :mod:`villani.bounds_table`)."""
    path = Path(layout.fmt(layout.BOUNDS_DIR, root, dataset=params["data"]["name"])) / "bounds.json"
    return atomic.read_json(path, "bounds summary")


def bounds_frame(params: Mapping, root) -> pd.DataFrame:
    """The raw bounds rows (``bounds.json["rows"]``) as a DataFrame; ``None`` becomes NaN
    in numeric columns, flags stay objects (True/False/None)."""
    rows = bounds_summary(params, root)["rows"]
    df = pd.DataFrame(rows)
    for col in df.columns:
        if df[col].map(lambda v: v is None or _is_number(v)).all():
            df[col] = df[col].map(_num)
    return df


def _num(x: Any) -> float:
    """A JSON number (also the "inf"/"-inf" strings :func:`villani.atomic.write_json` writes); None → NaN."""
    return np.nan if x is None else float(x)


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return v in ("inf", "-inf")


def cost_table(root) -> pd.DataFrame:
    """``results/cost/hvp_cost.csv`` (the HVP cost sweep of Fig 10)."""
    path = layout.fmt(layout.COST_CSV, root)
    if not Path(path).exists():
        raise ValueError(f"{path}: HVP cost sweep not found")
    return pd.read_csv(path)
