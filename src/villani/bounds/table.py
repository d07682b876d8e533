"""``villani bounds``: the bounds of section V per (dataset, variant, λ, seed, step), with
the hypotheses each rests on checked there, as CSV and JSON.

One row per checkpoint (:func:`bounds_row`), built run by run (:func:`run_bounds`) from the
formulas of :mod:`villani.bounds.theory` and the run's per-checkpoint measurements;
``docs/bounds.md`` states every formula. Every run of every variant gets rows.

**Hypotheses.** Each family of bounds rests on hypotheses (:data:`HYPOTHESES`,
:data:`FAMILIES`) that are checked per checkpoint (``hyp_<name>``: true/false, ``None``
where it cannot be evaluated, e.g. η ≤ η_max at λ = 0). A family's numbers are given
only where all its hypotheses hold; otherwise they are ``None`` and ``<family>_status``
names every failed hypothesis with its numbers (``"ok"`` when they all hold):

- ``c_ls`` (eq. 21/24: C_LS, C_P, C_LS(βF), η_max): λ > 0;
- ``theorem2`` (T of eq. 33): λ > 0; the run's update rule is eq. (36) (variant
  ``langevin``); η ≤ min(1, λ/(4σ²)); F(θ_t) ≥ F*;
- ``envelope`` (eq. 41 at this step, and whether it holds): those of ``theorem2`` and
  β = 1/λ (eq. 41 sets the injected noise's temperature to the Villani prior's); F(θ_t) ≤
  F(θ₀) is reported (``hyp_f_le_f0``) but is not a hypothesis — counting it would make
  "the envelope holds" restate the filter;
- ``pac_bayes`` (eq. 43–44): λ > 0; the KL bound before clamping is ≥ 0 (no KL is
  negative); L(θ̂) ≤ 1 (eq. 43 is for losses in [0, 1]; a mean cross-entropy above 1 nat
  means some token's loss exceeds 1).

**The minimum F*.** Theorem 2 and eq. (41) need F* = min F, unknown. ``f_star`` is
:data:`~villani.bounds.theory.F_STAR_LOWER` = 0, a genuine lower estimate (L ≥ 0 and
(λ/2)‖θ‖² ≥ 0), so F₀ − F* is over- rather than under-estimated and T is conservative;
``f_min_ckpt`` (the lowest F over the run's checkpoints) is an upper estimate of min F. Both
bracket F*, and ``envelope_check`` says whether eq. (41) holds for every F* in
[f_star, f_min_ckpt] (``"holds"``), for none (``"violated"``) or is ``"undetermined"``
(:func:`~villani.bounds.theory.envelope_check`).

Inputs:

- σ² = the run's measured gradient-noise variance ``grad_noise_sigma_sq`` (Tr Σ, measured
  at the first and last checkpoint): the *larger* of the measured values, so the η check
  of Theorem 2 is the stricter one and the envelope's noise term the larger;
- η = the run's peak learning rate (``train.lr``, a sweep arm's lr, or the Langevin arm's
  constant ``train.langevin.lr``: :func:`villani.plan.runs.variant_params`);
- n = train-split tokens and the vocabulary size from ``results/data/{dataset}/stats.json``,
  δ = ``bounds.delta``, ε = ``bounds.epsilon``, s = ``measure.s_values`` (the first is the
  primary s).

``bounds.csv`` prints through :mod:`villani.bounds.formatting`; ``bounds.json`` holds the raw
rows (``null``: no number), the inputs and a summary per variant and λ (C_LS, C_P, Theorem
2, PAC-Bayes tightness, failures per hypothesis, collapsed checkpoints).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from villani.bounds.formatting import csv_cell as _csv_cell
from villani.bounds.formatting import NOT_APPLICABLE, format_row, format_value  # noqa: F401 (importable here)
from villani.bounds.hypotheses import FAMILIES, FAMILY_COLUMNS, HYPOTHESES, family_status, hypotheses, objective
from villani.bounds.pac_bayes import pac_bayes
from villani.bounds.theory import (
    F_STAR_LOWER,
    UNDEFINED,
    c_ls_gibbs,
    c_ls_upper,
    envelope_check,
    envelope_terms,
    eta_max,
    positive_lam,
    steps_required,
)
from villani.diagnostics.collapse import is_collapsed
from villani.io import tables
from villani.io.records import RECORD_HASH, write_sealed
from villani.io.results import data_stats, run_records, train_tokens
from villani.plan import layout
from villani.plan.runs import run_beta, variant_kind, variant_params
from villani.diagnostics.psi import psi_slope_reference
from villani.statistics.samples import fit_slope, r_squared

_ID_KEYS = ("dataset", "variant", "lam", "seed", "step")
_COPY_KEYS = ("d", "theta_sq_norm", "loss", "F", "val_loss", "val_ppl")

F_STAR_METHOD = "lower bound 0: L >= 0 and (lam/2)|theta|^2 >= 0"


def _s_label(s: float) -> str:
    return f"c_ls_s{float(s):g}"


def bounds_row(
    measure: Mapping[str, Any],
    *,
    n_train_tokens: int,
    delta: float,
    s: float | Sequence[float],
    eta: float,
    sigma_sq: float,
    vocab_size: int,
    update_rule: str = "adamw",
    f0: float | None = None,
    f_min: float | None = None,
    eps: float = 0.01,
    smoothness_L: float | None = None,
    beta: float | None = None,
    noise_beta: float | None = None,
) -> dict[str, Any]:
    """One row of the bounds table for one checkpoint's measurement dict.

    ``measure`` needs ``lam``, ``d``, ``loss`` and ``F`` (or ``theta_sq_norm``); ``step``,
    ``seed``, ``dataset``, ``variant``, ``val_loss``, ``val_ppl`` are copied when present;
    ``collapsed``: :mod:`villani.diagnostics.collapse`. ``noise_beta``: the run's injected-noise β (``None``:
    none), checked against eq. (41)'s β = 1/λ; ``beta``: C_LS's and PAC-Bayes' (default 1/λ).
    ``s`` is one value or a list; the first is the primary s, used for ``c_ls``,
    ``c_ls_gibbs``, ``steps_required`` and the envelope; every s gets a ``c_ls_s{s}`` column
    (C_P has the same bound: ``c_p = c_ls``). ``n_train_tokens`` is the PAC-Bayes n;
    ``update_rule`` the run's variant kind (:func:`villani.plan.runs.variant_kind`).

    F* is :data:`~villani.bounds.theory.F_STAR_LOWER` (``f_star``); ``f0`` is F at the
    run's first checkpoint and ``f_min`` the lowest F over its checkpoints (an upper
    estimate of min F, ``f_min_ckpt``). Theorem 2 columns need ``f0``; envelope columns also
    ``smoothness_L`` and ``f_min`` (:func:`run_bounds` supplies all three). Each family's
    numbers are ``None`` unless its hypotheses hold (module docstring); ``hyp_<name>`` and
    ``<family>_status`` say which hold. ``status`` is ``"undefined"`` for λ = 0, else ``"ok"``.
    """
    lam = float(measure["lam"])
    d = float(measure["d"])
    s_list = [float(s)] if np.ndim(s) == 0 else [float(x) for x in s]  # type: ignore[arg-type]
    if not s_list:
        raise ValueError("s must hold at least one value")
    row: dict[str, Any] = {k: measure[k] for k in _ID_KEYS if k in measure}
    row.update({k: measure.get(k) for k in _COPY_KEYS})
    F = objective(measure)
    row["F"] = F
    row["status"] = "ok" if positive_lam(lam) else UNDEFINED
    row["update_rule"] = update_rule
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
    row.update(f0=f0, f_star=F_STAR_LOWER, f_star_method=F_STAR_METHOD, f_min_ckpt=f_min, eps=float(eps),
               smoothness_L=smoothness_L)
    pb = pac_bayes(
        float(measure["loss"]), F, d, lam,
        n=n_train_tokens, delta=delta, vocab_size=vocab_size, beta=beta,
    )  # fmt: skip
    ok, why = hypotheses(measure, update_rule=update_rule, eta=eta, sigma_sq=sigma_sq, f0=f0,
                         f_star=F_STAR_LOWER, kl_raw=pb.kl_raw, beta=noise_beta)
    row["noise_beta"] = noise_beta
    row["collapsed"] = is_collapsed(measure.get("val_ppl"), measure.get("val_loss"), vocab_size)
    row.update({f"hyp_{h}": ok[h] for h in HYPOTHESES})
    for family in FAMILIES:
        row[f"{family}_status"] = family_status(family, ok, why)

    _theorem2_columns(row, f0, c_ls, eta, eps)
    _envelope_columns(row, measure, F, f0, f_min, c_ls, eta, smoothness_L, sigma_sq, lam)
    _pac_bayes_columns(row, pb, measure.get("val_ppl"))
    return row


def _theorem2_columns(row: dict, f0: float | None, c_ls: float | None, eta: float, eps: float) -> None:
    """Theorem 2's step counts (eq. 33 with ε split and as printed) where its hypotheses hold and F(θ₀) is given."""
    row["steps_required"] = row["steps_required_eq33"] = None
    if f0 is not None and row["theorem2_status"] == "ok":
        gap = float(f0) - F_STAR_LOWER
        row["steps_required"] = steps_required(c_ls, eta, gap, eps)
        row["steps_required_eq33"] = steps_required(c_ls, eta, gap, eps, eps_split=False)
    elif f0 is None and row["theorem2_status"] == "ok":
        row["theorem2_status"] = f"{NOT_APPLICABLE}: F(θ₀) not given"


def _envelope_columns(row: dict, measure: Mapping[str, Any], F: float, f0: float | None, f_min: float | None,
                      c_ls: float | None, eta: float, smoothness_L: float | None, sigma_sq: float, lam: float) -> None:
    """Eq. (41)'s envelope at this step (as printed and as eqs. 38+40 give it) and whether it holds, where the
    envelope's hypotheses hold and L, the lowest F and the step are given."""
    for key in FAMILY_COLUMNS["envelope"]:
        row[key] = None
    if row["envelope_status"] == "ok" and (smoothness_L is None or f_min is None or "step" not in measure):
        row["envelope_status"] = f"{NOT_APPLICABLE}: smoothness L, lowest F or step not given"
    if row["envelope_status"] == "ok":
        for key, form in (("envelope", "paper"), ("envelope_consistent", "consistent")):
            factor, noise = envelope_terms([float(measure["step"])], c_ls, eta, smoothness_L, sigma_sq, lam,
                                           form=form)  # type: ignore[misc]
            row[key] = float(factor[0]) * (float(f0) - F_STAR_LOWER) + noise  # type: ignore[arg-type]
            row[f"{key}_check"] = envelope_check(F, float(f0), float(factor[0]), noise,  # type: ignore[arg-type]
                                                 F_STAR_LOWER, float(f_min))  # type: ignore[arg-type]


def _pac_bayes_columns(row: dict, pb, val_ppl: float | None) -> None:
    """The PAC-Bayes columns (eq. 43–44) and the bound over the validation perplexity; its numbers
    ``None`` unless its hypotheses hold."""
    row.update({f"pb_{k}": v for k, v in pb.to_dict().items()})
    row["pb_ppl_ratio"] = (
        pb.ppl_bound / float(val_ppl) if pb.ppl_bound is not None and val_ppl is not None else None
    )
    if row["pac_bayes_status"] != "ok":
        for key in FAMILY_COLUMNS["pac_bayes"]:
            row[key] = None


def run_bounds(
    measures: Sequence[Mapping[str, Any]],
    *,
    smoothness_L: float | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Rows of :func:`bounds_row` for every checkpoint of one run (one dataset, variant, λ, seed).

    Run-level inputs, chosen here and recorded in each row:

    - F₀ = F at the earliest checkpoint;
    - F* = 0 (``f_star``, a lower bound of min F) and the lowest F over the run's
      checkpoints (``f_min_ckpt``, an upper estimate): see the module docstring;
    - L (smoothness) = ``smoothness_L`` if given, else the largest of all
      ``top_eigenvalues`` over the run (the Hessian's top eigenvalue at visited points:
      a local value, at most the global L: optimistic).

    Other keyword arguments go to :func:`bounds_row`. Rows are sorted by step.
    """
    if not measures:
        return []
    ordered = sorted(measures, key=lambda m: m.get("step", 0))
    fs = [objective(m) for m in ordered]
    tops = [max(m["top_eigenvalues"]) for m in ordered if m.get("top_eigenvalues")]
    L = smoothness_L if smoothness_L is not None else (float(max(tops)) if tops else None)
    return [bounds_row(m, f0=fs[0], f_min=min(fs), smoothness_L=L, **kwargs) for m in ordered]


def run_sigma_sq(measures: list[Mapping]) -> float:
    """The σ² used for a run: the largest measured ``grad_noise_sigma_sq`` over its checkpoints."""
    values = [float(m["grad_noise_sigma_sq"]) for m in measures if m.get("grad_noise_sigma_sq") is not None]
    if not values:
        where = measures[0].get("_path", "the run's measurements") if measures else "the run"
        raise ValueError(f"{where}: no checkpoint of the run has grad_noise_sigma_sq (needed for Theorem 2)")
    return max(values)


def bounds_rows(params: Mapping, root) -> tuple[list[dict], dict]:
    """(rows, inputs): one :func:`bounds_row` per checkpoint of every run of every variant."""
    stats = data_stats(params, root)
    inputs = {
        "n_train_tokens": train_tokens(stats), "vocab_size": int(stats["vocab_size"]),
        "delta": params.bounds.delta, "eps": params.bounds.epsilon, "s_values": list(params.measure.s_values),
        "f_star": F_STAR_LOWER, "f_star_method": F_STAR_METHOD, "eta": {}, "sigma_sq": {}, "measurements": {},
    }
    rows: list[dict] = []
    for run, measures in run_records(params, root).items():
        inputs["measurements"].update({Path(m["_path"]).relative_to(Path(root)).as_posix(): m[RECORD_HASH]
                                       for m in measures})
        sigma_sq = run_sigma_sq(measures)
        eta = variant_params(params, run.variant).train.lr
        noise_beta = run_beta(params, run.variant, run.lam)
        key = f"{run.variant}/lam{layout.format_lam(run.lam)}/seed{run.seed}"
        inputs["sigma_sq"][key] = sigma_sq
        inputs["eta"][key] = eta
        rows += run_bounds(
            measures, n_train_tokens=inputs["n_train_tokens"], delta=inputs["delta"], s=inputs["s_values"],
            eta=eta, sigma_sq=sigma_sq, vocab_size=inputs["vocab_size"], eps=inputs["eps"],
            update_rule=variant_kind(run.variant), noise_beta=noise_beta,
        )  # fmt: skip
    return rows, inputs


def _finite(values) -> np.ndarray:
    a = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    return a[np.isfinite(a)]


def failure_counts(rows: list[Mapping], family: str) -> dict[str, int]:
    """How many of ``rows`` fail each hypothesis of ``family`` (``False``; ``None`` counts as
    not evaluable and is left out)."""
    return {h: sum(r.get(f"hyp_{h}") is False for r in rows) for h in FAMILIES[family]}


def tightness(rows: list[Mapping]) -> dict[str, Any]:
    """Fig 6's numbers for one variant and λ, over the checkpoints where the PAC-Bayes bound's
    hypotheses hold (``pac_bayes_status`` ok) and its perplexity bound is finite: mean and
    final bound/perplexity ratio, R² and the signed correlation.

    ``r2`` is the squared correlation of the bound with validation perplexity (the best
    line's R², the paper's "R² ≈ 0.93"), ``pearson_r`` its signed root; ``r2_diagonal``
    scores the diagonal y = x itself (1 − SS_res/SS_tot, can be negative). ``None`` where
    no number can be given (no applicable checkpoint, < 2 points, constant values);
    ``failed`` counts the checkpoints failing each hypothesis.
    """
    applicable = [r for r in rows if r.get("pac_bayes_status") == "ok"]
    pts = [(float(r["val_ppl"]), float(r["pb_ppl_bound"])) for r in applicable
           if r.get("pb_ppl_bound") is not None and r.get("val_ppl") is not None
           and math.isfinite(float(r["pb_ppl_bound"]))]
    out: dict[str, Any] = {
        "n_checkpoints": len(rows),
        "n_applicable": len(applicable),
        "n_finite": len(pts),
        "n_vacuous": sum(bool(r.get("pb_vacuous")) for r in applicable),
        "failed": failure_counts(rows, "pac_bayes"),
        "mean_ratio": None, "final_ratio": None, "r2": None, "pearson_r": None, "r2_diagonal": None,
    }
    if not pts:
        return out
    x, y = np.array(pts).T
    out["mean_ratio"] = float(np.mean(y / x))
    last = max(int(r["step"]) for r in rows)
    final = _finite(r.get("pb_ppl_ratio") for r in applicable if int(r["step"]) == last)
    out["final_ratio"] = float(final.mean()) if final.size else None
    if len(pts) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        out["r2"] = fit_slope(x, y).r2
        out["pearson_r"] = float(np.corrcoef(x, y)[0, 1])
        out["r2_diagonal"] = r_squared(y, x)
    return out


def summarize(rows: list[Mapping], inputs: Mapping) -> dict[str, dict]:
    """Per variant and λ (``summary[variant][format_lam(λ)]``): the constants, Theorem 2 per
    seed (with its status), PAC-Bayes tightness and how many checkpoints fail each hypothesis."""
    out: dict[str, dict] = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        vrows = [r for r in rows if r["variant"] == variant]
        for lam in sorted({float(r["lam"]) for r in vrows}):
            rs = [r for r in vrows if float(r["lam"]) == lam]
            first = rs[0]
            per_seed = {}
            for seed in sorted({int(r["seed"]) for r in rs}):
                r0 = next(r for r in rs if int(r["seed"]) == seed)
                per_seed[str(seed)] = {k: r0.get(k) for k in (
                    "eta", "sigma_sq", "eta_max", "eta_ok", "f0", "f_star", "f_min_ckpt", "smoothness_L",
                    "theorem2_status", "steps_required", "steps_required_eq33")}
            s0 = inputs["s_values"][0]
            out.setdefault(variant, {})[layout.format_lam(lam)] = {
                "status": first["status"], "update_rule": first.get("update_rule"), "d": first["d"],
                "c_ls": {f"{s:g}": first.get(f"c_ls_s{s:g}") for s in inputs["s_values"]},
                "c_p": first.get("c_p"), "c_ls_gibbs": first.get("c_ls_gibbs"),
                "eta_ok_all_seeds": (None if first.get("eta_ok") is None
                                     else all(bool(r.get("eta_ok")) for r in rs)),
                "psi_slope_reference": psi_slope_reference(lam, s0),
                "per_seed": per_seed,
                "theorem2": {"n_checkpoints": len(rs),
                             "n_applicable": sum(r["theorem2_status"] == "ok" for r in rs),
                             "failed": failure_counts(rs, "theorem2")},
                "envelope": {"n_checkpoints": len(rs),
                             "n_applicable": sum(r["envelope_status"] == "ok" for r in rs),
                             "n_holds": sum(r.get("envelope_check") == "holds" for r in rs),
                             "n_violated": sum(r.get("envelope_check") == "violated" for r in rs),
                             "failed": failure_counts(rs, "envelope")},
                "pac_bayes": (UNDEFINED if first["status"] == UNDEFINED else tightness(rs)),
                "n_collapsed": sum(r.get("collapsed") is True for r in rs),
            }
    return out


def write_bounds(params: Mapping, root=layout.RESULTS) -> str:
    """Write ``bounds.csv`` and ``bounds.json`` of the dataset; return the folder."""
    rows, inputs = bounds_rows(params, root)
    if not rows:
        raise ValueError("no measurements to bound (train.lambdas × train.seeds is empty?)")
    csv_path, json_path = (layout.fmt(f, root, dataset=params["data"]["name"])
                           for f in (layout.BOUNDS_CSV, layout.BOUNDS_JSON))
    columns = list(rows[0])
    lines = [",".join(columns)]
    for row in rows:
        text = format_row(row)
        lines.append(",".join(_csv_cell(text[c]) for c in columns))
    tables.write("bounds", csv_path, pd.DataFrame(rows, columns=columns), text="\n".join(lines) + "\n")
    write_sealed(json_path, {
        "dataset": params["data"]["name"], "inputs": inputs, "summary": summarize(rows, inputs), "rows": rows,
    }, "bounds")
    n_undef = sum(r["status"] == UNDEFINED for r in rows)
    n = {f: sum(r[f"{f}_status"] == "ok" for r in rows) for f in ("theorem2", "envelope", "pac_bayes")}
    return (f"{csv_path.parent}: {len(rows)} rows ({n_undef} undefined, λ = 0); hypotheses hold for Theorem 2 at "
            f"{n['theorem2']}, the envelope at {n['envelope']}, PAC-Bayes at {n['pac_bayes']}")
