"""``villani bounds``: the bounds of section V per (dataset, λ, seed, step), as CSV and JSON.

Rows come from :func:`villani.bounds.run_bounds` (one call per run, on the run's
per-checkpoint measurements); ``docs/bounds.md`` states every formula. Inputs:

- σ² = the run's measured gradient-noise variance ``grad_noise_sigma_sq`` (Tr Σ, measured
  at the first and last checkpoint): the *larger* of the measured values, so the η check
  of Theorem 2 is the stricter one and the envelope's noise term the larger;
- η = ``train.lr`` (the peak learning rate), n = train-split tokens and the vocabulary
  size from ``results/data/{dataset}/stats.json``, δ = ``bounds.delta``,
  ε = ``bounds.epsilon``, s = ``measure.s_values`` (the first is the primary s).

``bounds.csv`` is written through :func:`villani.bounds.format_row`: an undefined bound
(every bound at λ = 0) reads ``undefined``, never a number. ``bounds.json`` holds the raw
rows (``null`` where undefined, ``"inf"`` for an overflowing perplexity bound), the inputs,
and a per-λ summary (C_LS, C_P, Theorem 2, PAC-Bayes tightness, clamped/vacuous counts).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from villani import atomic, layout
from villani.bounds import UNDEFINED, format_row, psi_slope_reference, run_bounds
from villani.readers import data_stats, run_records, train_tokens
from villani.stats import fit_slope, r_squared


def run_sigma_sq(measures: list[Mapping]) -> float:
    """The σ² used for a run: the largest measured ``grad_noise_sigma_sq`` over its checkpoints."""
    values = [float(m["grad_noise_sigma_sq"]) for m in measures if m.get("grad_noise_sigma_sq") is not None]
    if not values:
        where = measures[0].get("_path", "the run's measurements") if measures else "the run"
        raise ValueError(f"{where}: no checkpoint of the run has grad_noise_sigma_sq (needed for Theorem 2)")
    return max(values)


def bounds_rows(params: Mapping, root) -> tuple[list[dict], dict]:
    """(rows, inputs): one :func:`villani.bounds.bounds_row` per checkpoint of every plain run."""
    stats = data_stats(params, root)
    inputs = {
        "eta": float(params["train"]["lr"]), "n_train_tokens": train_tokens(stats),
        "vocab_size": int(stats["vocab_size"]), "delta": float(params["bounds"]["delta"]),
        "eps": float(params["bounds"]["epsilon"]), "s_values": [float(s) for s in params["measure"]["s_values"]],
        "sigma_sq": {},
    }
    rows: list[dict] = []
    for run, measures in run_records(params, root).items():
        sigma_sq = run_sigma_sq(measures)
        inputs["sigma_sq"][f"lam={layout.format_lam(run.lam)}/seed={run.seed}"] = sigma_sq
        rows += run_bounds(
            measures, n_train_tokens=inputs["n_train_tokens"], delta=inputs["delta"], s=inputs["s_values"],
            eta=inputs["eta"], sigma_sq=sigma_sq, vocab_size=inputs["vocab_size"], eps=inputs["eps"],
        )  # fmt: skip
    return rows, inputs


def _finite(values) -> np.ndarray:
    a = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return a[np.isfinite(a)]


def tightness(rows: list[Mapping]) -> dict[str, Any]:
    """Fig 6's numbers for one λ: mean bound/perplexity ratio and R², over every checkpoint
    and seed whose perplexity bound is finite.

    ``r2`` is the squared correlation of the bound with validation perplexity (the best
    line's R², the paper's "R² ≈ 0.93"); ``r2_diagonal`` scores the diagonal y = x itself
    (1 − SS_res/SS_tot, can be negative). ``None`` where undefined (λ = 0, < 2 points,
    constant values).
    """
    pts = [(float(r["val_ppl"]), float(r["pb_ppl_bound"])) for r in rows
           if r.get("pb_ppl_bound") is not None and r.get("val_ppl") is not None
           and math.isfinite(float(r["pb_ppl_bound"]))]
    out: dict[str, Any] = {
        "n_checkpoints": len(rows),
        "n_finite": len(pts),
        "n_kl_clamped": sum(bool(r.get("pb_kl_clamped")) for r in rows),
        "n_vacuous": sum(bool(r.get("pb_vacuous")) for r in rows),
        "mean_ratio": None, "final_ratio": None, "r2": None, "r2_diagonal": None,
    }
    if not pts:
        return out
    x, y = np.array(pts).T
    out["mean_ratio"] = float(np.mean(y / x))
    last = max(int(r["step"]) for r in rows)
    final = _finite(r.get("pb_ppl_ratio") for r in rows if int(r["step"]) == last)
    out["final_ratio"] = float(final.mean()) if final.size else None
    if len(pts) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        out["r2"] = fit_slope(x, y).r2
        out["r2_diagonal"] = r_squared(y, x)
    return out


def summarize(rows: list[Mapping], inputs: Mapping) -> dict[str, dict]:
    """Per-λ summary (keys ``format_lam(λ)``): the constants, Theorem 2 and PAC-Bayes tightness."""
    out: dict[str, dict] = {}
    for lam in sorted({float(r["lam"]) for r in rows}):
        rs = [r for r in rows if float(r["lam"]) == lam]
        first = rs[0]
        seeds = sorted({int(r["seed"]) for r in rs})
        per_seed = {}
        for seed in seeds:
            r0 = next(r for r in rs if int(r["seed"]) == seed)
            per_seed[str(seed)] = {k: r0.get(k) for k in (
                "sigma_sq", "eta_max", "eta_ok", "f0", "f_star", "smoothness_L", "steps_required", "steps_required_eq33")}
        s0 = inputs["s_values"][0]
        entry = {
            "status": first["status"], "d": first["d"],
            "c_ls": {f"{s:g}": first.get(f"c_ls_s{s:g}") for s in inputs["s_values"]},
            "c_p": first.get("c_p"), "c_ls_gibbs": first.get("c_ls_gibbs"),
            "eta": first.get("eta"), "eta_ok_all_seeds": (None if first.get("eta_ok") is None
                                                          else all(bool(r.get("eta_ok")) for r in rs)),
            "psi_slope_reference": psi_slope_reference(lam, s0),
            "per_seed": per_seed,
            "pac_bayes": (UNDEFINED if first["status"] == UNDEFINED else tightness(rs)),
        }
        out[layout.format_lam(lam)] = entry
    return out


def write_bounds(params: Mapping, root=layout.RESULTS) -> str:
    """Write ``bounds.csv`` and ``bounds.json`` of the dataset; return the folder."""
    rows, inputs = bounds_rows(params, root)
    if not rows:
        raise ValueError("no measurements to bound (train.lambdas × train.seeds is empty?)")
    folder = Path(layout.fmt(layout.BOUNDS_DIR, root, dataset=params["data"]["name"]))
    columns = list(rows[0])
    lines = [",".join(columns)]
    for row in rows:
        text = format_row(row)
        lines.append(",".join(_csv_cell(text[c]) for c in columns))
    atomic.write_text(folder / "bounds.csv", "\n".join(lines) + "\n")
    atomic.write_json(folder / "bounds.json", {
        "dataset": params["data"]["name"], "inputs": inputs, "summary": summarize(rows, inputs), "rows": rows,
    })
    n_undef = sum(r["status"] == UNDEFINED for r in rows)
    return f"{folder}: {len(rows)} rows ({n_undef} undefined, λ = 0)"


def _csv_cell(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text
