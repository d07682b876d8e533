"""``villani bounds``: the bounds of section V per (dataset, λ, seed, step), as CSV and JSON.

One row per checkpoint (:func:`bounds_row`), built run by run (:func:`run_bounds`) from the
formulas of :mod:`villani.bounds.theory` and the run's per-checkpoint measurements;
``docs/bounds.md`` states every formula. Inputs:

- σ² = the run's measured gradient-noise variance ``grad_noise_sigma_sq`` (Tr Σ, measured
  at the first and last checkpoint): the *larger* of the measured values, so the η check
  of Theorem 2 is the stricter one and the envelope's noise term the larger;
- η = ``train.lr`` (the peak learning rate), n = train-split tokens and the vocabulary
  size from ``results/data/{dataset}/stats.json``, δ = ``bounds.delta``,
  ε = ``bounds.epsilon``, s = ``measure.s_values`` (the first is the primary s).

``bounds.csv`` is written through :func:`format_row`: an undefined bound
(every bound at λ = 0) reads ``undefined``, never a number. ``bounds.json`` holds the raw
rows (``null`` where undefined, ``"inf"`` for an overflowing perplexity bound), the inputs,
and a per-λ summary (C_LS, C_P, Theorem 2, PAC-Bayes tightness, clamped/vacuous counts).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from villani.bounds.theory import (
    UNDEFINED,
    c_ls_gibbs,
    c_ls_upper,
    envelope,
    eta_max,
    pac_bayes,
    positive_lam,
    steps_required,
)
from villani.io import atomic
from villani.io.results import data_stats, run_records, train_tokens
from villani.plan import layout
from villani.psi import psi_slope_reference
from villani.stats import fit_slope, r_squared

_ID_KEYS = ("dataset", "variant", "lam", "seed", "step")
_COPY_KEYS = ("d", "theta_sq_norm", "loss", "F", "val_loss", "val_ppl")


def _s_label(s: float) -> str:
    return f"c_ls_s{float(s):g}"


def _objective(measure: Mapping[str, Any]) -> float:
    if measure.get("F") is not None:
        return float(measure["F"])
    return float(measure["loss"]) + 0.5 * float(measure["lam"]) * float(measure["theta_sq_norm"])


def bounds_row(
    measure: Mapping[str, Any],
    *,
    n_train_tokens: int,
    delta: float,
    s: float | Sequence[float],
    eta: float,
    sigma_sq: float,
    vocab_size: int,
    f0: float | None = None,
    f_star: float | None = None,
    eps: float = 0.01,
    smoothness_L: float | None = None,
    beta: float | None = None,
) -> dict[str, Any]:
    """One row of the bounds table for one checkpoint's measurement dict.

    ``measure`` needs ``lam``, ``d``, ``loss`` and ``F`` (or ``theta_sq_norm``); ``step``,
    ``seed``, ``dataset``, ``variant``, ``val_loss``, ``val_ppl`` are copied when present.
    ``s`` is one value or a list; the first is the primary s, used for ``c_ls``,
    ``c_ls_gibbs``, ``steps_required`` and the envelope; every s gets a ``c_ls_s{s}`` column
    (C_P has the same bound: ``c_p = c_ls``). ``n_train_tokens`` is the PAC-Bayes n.

    Theorem 2 columns (``steps_required``, ``steps_required_eq33``) need ``f0`` and
    ``f_star``; envelope columns (``envelope``, ``envelope_consistent`` at this step) also
    need ``smoothness_L``; they are ``None`` otherwise. :func:`run_bounds` supplies all
    three per run. PAC-Bayes columns are ``pb_*`` (fields of :class:`PacBayes`) and
    ``pb_ppl_ratio`` = ppl_bound / val_ppl (Fig 6's tightness). ``status`` is
    ``"undefined"`` for λ = 0, else ``"ok"``. Every bound is ``None`` when undefined.
    """
    lam = float(measure["lam"])
    d = float(measure["d"])
    s_list = [float(s)] if np.ndim(s) == 0 else [float(x) for x in s]  # type: ignore[arg-type]
    if not s_list:
        raise ValueError("s must hold at least one value")
    row: dict[str, Any] = {k: measure[k] for k in _ID_KEYS if k in measure}
    row.update({k: measure.get(k) for k in _COPY_KEYS})
    F = _objective(measure)
    row["F"] = F
    row["status"] = "ok" if positive_lam(lam) else UNDEFINED
    row["s"] = s_list[0]
    for sv in s_list:
        row[_s_label(sv)] = c_ls_upper(lam, d, sv)
    c_ls = row[_s_label(s_list[0])]
    row["c_ls"] = c_ls
    row["c_p"] = c_ls
    row["c_ls_gibbs"] = c_ls_gibbs(lam, d, s_list[0], beta)
    row["eta"] = float(eta)
    row["sigma_sq"] = float(sigma_sq)
    row["eta_max"] = eta_max(lam, sigma_sq)
    row["eta_ok"] = None if row["eta_max"] is None else float(eta) <= row["eta_max"]
    row.update(f0=f0, f_star=f_star, eps=float(eps), smoothness_L=smoothness_L)
    have_gap = f0 is not None and f_star is not None
    gap = float(f0) - float(f_star) if have_gap else None  # type: ignore[arg-type]
    row["steps_required"] = steps_required(c_ls, eta, gap, eps) if have_gap else None
    row["steps_required_eq33"] = steps_required(c_ls, eta, gap, eps, eps_split=False) if have_gap else None
    row["envelope"] = row["envelope_consistent"] = None
    if have_gap and smoothness_L is not None and c_ls is not None and "step" in measure:
        for key, form in (("envelope", "paper"), ("envelope_consistent", "consistent")):
            env = envelope([float(measure["step"])], gap, c_ls, eta, smoothness_L, sigma_sq, lam, form=form)
            row[key] = float(env[0])  # type: ignore[index]
    pb = pac_bayes(
        float(measure["loss"]), F, d, lam,
        n=n_train_tokens, delta=delta, vocab_size=vocab_size, beta=beta,
    )  # fmt: skip
    row.update({f"pb_{k}": v for k, v in pb.to_dict().items()})
    val_ppl = measure.get("val_ppl")
    row["pb_ppl_ratio"] = (
        pb.ppl_bound / float(val_ppl) if pb.ppl_bound is not None and val_ppl is not None else None
    )
    return row


def _max_top_eigenvalue(measures: Iterable[Mapping[str, Any]]) -> float | None:
    tops = [max(m["top_eigenvalues"]) for m in measures if m.get("top_eigenvalues")]
    return float(max(tops)) if tops else None


def run_bounds(
    measures: Sequence[Mapping[str, Any]],
    *,
    smoothness_L: float | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Rows of :func:`bounds_row` for every checkpoint of one run (one dataset, λ, seed).

    Run-level inputs, chosen here and recorded in each row:

    - F₀ = F at the earliest checkpoint;
    - F* = the smallest F over the run's checkpoints. The true global minimum is unknown
      and at most this, so F₀ − F* is under-estimated and ``steps_required`` and the
      envelope are optimistic (smaller) — they favour the paper;
    - L (smoothness) = ``smoothness_L`` if given, else the largest of all
      ``top_eigenvalues`` over the run (the Hessian's top eigenvalue at visited points:
      a local value, at most the global L, again optimistic).

    Other keyword arguments go to :func:`bounds_row`. Rows are sorted by step.
    """
    if not measures:
        return []
    ordered = sorted(measures, key=lambda m: m.get("step", 0))
    fs = [_objective(m) for m in ordered]
    L = smoothness_L if smoothness_L is not None else _max_top_eigenvalue(ordered)
    return [bounds_row(m, f0=fs[0], f_star=min(fs), smoothness_L=L, **kwargs) for m in ordered]


def format_value(value: Any, fmt: str = "{:.6g}") -> str:
    """How a table prints a value: ``None`` (an undefined bound) is ``"undefined"``.

    Booleans are ``true``/``false``, floats use ``fmt`` (``inf`` stays ``inf``); NaN is
    refused, since no function here produces one — it would be a bug upstream.
    """
    if value is None:
        return UNDEFINED
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            raise ValueError("NaN in a bounds table: undefined bounds must be None")
        return fmt.format(float(value))
    return str(value)


def format_row(row: Mapping[str, Any], fmt: str = "{:.6g}") -> dict[str, str]:
    """:func:`format_value` applied to every value of a row."""
    return {k: format_value(v, fmt) for k, v in row.items()}



def run_sigma_sq(measures: list[Mapping]) -> float:
    """The σ² used for a run: the largest measured ``grad_noise_sigma_sq`` over its checkpoints."""
    values = [float(m["grad_noise_sigma_sq"]) for m in measures if m.get("grad_noise_sigma_sq") is not None]
    if not values:
        where = measures[0].get("_path", "the run's measurements") if measures else "the run"
        raise ValueError(f"{where}: no checkpoint of the run has grad_noise_sigma_sq (needed for Theorem 2)")
    return max(values)


def bounds_rows(params: Mapping, root) -> tuple[list[dict], dict]:
    """(rows, inputs): one :func:`bounds_row` per checkpoint of every plain run."""
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
