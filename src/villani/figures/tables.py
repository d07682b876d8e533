"""Tables I and III of the paper and the efficiency table, as CSV under ``results/tables/``.

- ``table1_hyperparameters``: the paper's Table I layout (parameter, value used,
  theoretical guideline, what the measurements say), from the params and the measured σ².
- ``table1_guideline_checks``: the numbers behind it per (λ, seed), from
  :func:`villani.bounds.guideline_checks`: η vs λ/(4σ²) with σ² measured at the first and
  at the last checkpoint, and λ‖θ₀‖² vs 10·L(θ₀) at step 0.
- ``table3_trace_stats``: per dataset × λ the mean trace of ∇²F = λd + tr∇²L over all
  checkpoints and seeds, beside λd and tr∇²L, the relative error of the estimate and the
  95% CI (see :func:`trace_stats`).
- ``table_efficiency``: wall-clock training time to a target validation perplexity per λ
  (see :func:`efficiency`).

Undefined entries (every bound-derived value at λ = 0) read ``undefined``
(:func:`villani.bounds.table.format_value`), never a number.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from villani.bounds.table import format_row, format_value
from villani.bounds.theory import guideline_checks
from villani.statistics.convergence import first_reach
from villani.plan.families import config_value, family_of
from villani.io.results import data_stats, measurements, run_records, train_tokens
from villani.plan.frozen import Params
from villani.plan.runs import variant_params
from villani.plan.schedule import checkpoint_steps


def _fmt_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([format_row(r) for r in rows])


# --------------------------------------------------------------------------- Table I


def guideline_rows(params: Mapping, root) -> list[dict]:
    """Per (variant, λ, seed): the Table I guideline checks with σ² at the first and last
    checkpoint, η the run's peak (or, for the Langevin arm, constant) learning rate."""
    out = []
    for run, recs in run_records(params, root).items():
        eta = variant_params(params, run.variant).train.lr
        first, last = recs[0], recs[-1]
        row = {"variant": run.variant, "lam": run.lam, "seed": run.seed, "eta": eta}
        for tag, rec in (("theta0", first), ("final", last)):
            sigma = rec.get("grad_noise_sigma_sq")
            g = (guideline_checks(eta, run.lam, float(sigma), float(first["theta_sq_norm"]), float(first["loss"]))
                 if sigma is not None else None)
            row[f"sigma_sq_{tag}"] = None if sigma is None else float(sigma)
            row[f"eta_limit_{tag}"] = None if g is None else g["eta_limit"]
            row[f"eta_ok_{tag}"] = None if g is None else g["eta_ok"]
        g0 = guideline_checks(eta, run.lam, 0.0, float(first["theta_sq_norm"]), float(first["loss"]))
        row.update(theta0_sq_norm=float(first["theta_sq_norm"]), L0=float(first["loss"]),
                   lam_theta0=g0["lam_theta0"], ten_L0=g0["ten_L0"], lam_theta0_ratio=g0["lam_theta0_ratio"],
                   lam_theta0_ok=g0["lam_theta0_ok"])
        out.append(row)
    return out


def render_guidelines(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    return save(None, _fmt_frame(guideline_rows(params, root)), params, root, name, kind="table")


def _per_lam(rows: list[dict], key: str) -> dict[float, list]:
    out: dict[float, list] = {}
    for r in rows:
        out.setdefault(float(r["lam"]), []).append(r[key])
    return out


def _check_text(values: dict[float, list], fmt: Callable) -> str:
    return "; ".join(f"λ={lam:g}: {fmt(lam, vs)}" for lam, vs in sorted(values.items()))


def hyperparameter_rows(params: Mapping, root) -> list[dict]:
    t, me, mo = params.train, params.measure, params.model
    everything = guideline_rows(params, root)
    g = [r for r in everything if r["variant"] == "adamw"]
    stats = data_stats(params, root)
    m = measurements(params, root)
    d = int(m["d"].iloc[0])
    tokens_per_step = t.batch_size * params.data.seq_len
    epochs = t.steps * tokens_per_step / max(train_tokens(stats), 1)

    def eta_check(lam, rs):
        lim = [r for r in rs if r is not None]
        if lam == 0:
            return "undefined (Theorem 2 needs λ > 0)"
        if not lim:
            return "σ² not measured"
        limit = float(np.mean(lim))
        return f"λ/(4σ²) = {limit:.3g} → {'met' if t.lr <= min(1.0, limit) else 'violated'}"

    def lam_check(lam, rs):
        return f"ratio {np.mean(rs):.3g} → {'met' if np.mean(rs) >= 1 else 'not met'}"

    sig = _per_lam(g, "sigma_sq_theta0")
    sig_last = _per_lam(g, "sigma_sq_final")
    if mo.get("name"):
        model = f"{mo.name} ({mo.init})"
    else:
        c = mo.config
        model = (f"{family_of(c)} from scratch: {config_value(c, 'layers')} layers, "
                 f"hidden {config_value(c, 'hidden')}, {config_value(c, 'heads')} heads, MLP {config_value(c, 'mlp')}")
    return [
        {"parameter": "learning rate η (peak)", "value": f"{t.lr:g}",
         "guideline": "η ≲ λ/(4σ²)  (Theorem 2: η ≤ min(1, λ/(4σ²)))",
         "measured": _check_text(_per_lam(g, "eta_limit_theta0"), eta_check) + " (σ² at step 0, mean over seeds)"},
        {"parameter": "weight decay λ", "value": ", ".join(f"{x:g}" for x in t.lambdas),
         "guideline": "pick λ so that λ‖θ₀‖² ≈ 10·L(θ₀)",
         "measured": _check_text(_per_lam(g, "lam_theta0_ratio"), lam_check) + " (λ‖θ₀‖² / 10·L(θ₀))"},
        {"parameter": "decay mode / decayed tensors", "value": f"{t.decay_mode} / {t.decay_params}",
         "guideline": "θ is every trainable parameter (SPEC §1)", "measured": ""},
        {"parameter": "batch size", "value": f"{t.batch_size} blocks × {params.data.seq_len} tokens "
                                             f"= {tokens_per_step} tokens", "guideline": "—", "measured": ""},
        {"parameter": "AdamW β", "value": f"({t.betas[0]:g}, {t.betas[1]:g})", "guideline": "—",
         "measured": ""},
        {"parameter": "schedule", "value": f"linear warm-up {t.warmup_steps} steps, cosine to 0 at "
                                          f"{t.steps} steps ({epochs:.2g} epochs of {train_tokens(stats)} "
                                          "train tokens)", "guideline": "—", "measured": ""},
        {"parameter": "gradient noise σ² (measured, Tr Σ)",
         "value": _check_text(sig, lambda lam, rs: "/".join(format_value(x, "{:.3g}") for x in rs))
                  + " at step 0; "
                  + _check_text(sig_last, lambda lam, rs: "/".join(format_value(x, "{:.3g}") for x in rs))
                  + " at the end (per seed, AdamW runs)",
         "guideline": "β⁻¹ = ησ²/(2d), match with λ",
         "measured": _arms_text(params)},
        *_langevin_rows(params, [r for r in everything if r["variant"] == "langevin"]),
        {"parameter": "seeds", "value": ", ".join(map(str, t.seeds)), "guideline": "—", "measured": ""},
        {"parameter": "model", "value": f"{model}; d = {d} parameters", "guideline": "—", "measured": ""},
        {"parameter": "curvature measurement",
         "value": f"{_trace_text(me)}, top-{me.top_k} by {_lanczos_text(me)} Lanczos steps, "
                  f"SLQ {_slq_text(me)}×{me.slq_steps}, {me.blocks} blocks, s = "
                  f"{', '.join(f'{x:g}' for x in me.s_values)}",
         "guideline": "paper: M = 64, top-20", "measured": ""},
    ]


def _arms_text(params: Mapping) -> str:
    """The other update rules of the params, in words."""
    t = params.train
    lams = lambda xs: "{" + ", ".join(f"{x:g}" for x in xs) + "}"  # noqa: E731
    parts = []
    if t.adamw_noise.lambdas:
        parts.append(f"noisy AdamW at λ ∈ {lams(t.adamw_noise.lambdas)}, ξ ~ N(0, {t.adamw_noise.grad_std:g}²)")
    if t.adam_l2.lambdas:
        parts.append(f"Adam on F (coupled L2) at λ ∈ {lams(t.adam_l2.lambdas)}")
    if t.langevin.lambdas:
        lv = t.langevin
        beta = ("2/(η·σ²), σ = " + f"{lv.table1_std:g}" if lv.beta == "table1"
                else "1/λ" if lv.beta is None else f"{lv.beta:g}")
        parts.append(f"Langevin SGD on F (eq. 36) at λ ∈ {lams(lv.lambdas)}, η = {lv.lr:g}, β = {beta}")
    sw = t.sweep
    if sw.lr or sw.warmup_steps:
        parts.append("AdamW sweep arms: " + ", ".join([f"η = {x:g}" for x in sw.lr]
                                                      + [f"warm-up {w}" for w in sw.warmup_steps]))
    return "; ".join(parts) or "AdamW only"


def _langevin_rows(params: Mapping, rows: list[dict]) -> list[dict]:
    """Theorem 2's η check for the Langevin arm (the only update rule it is about)."""
    if not rows:
        return []
    def check(r):
        if r["eta_limit_theta0"] is None:
            return f"λ={r['lam']:g} seed {r['seed']}: undefined (λ = 0)"
        limits = [x for x in (r["eta_limit_theta0"], r["eta_limit_final"]) if x is not None]
        ok = all(r["eta"] <= min(1.0, x) for x in limits)
        return (f"λ={r['lam']:g} seed {r['seed']}: λ/(4σ²) = {min(limits):.3g} → {'met' if ok else 'violated'}")
    return [{"parameter": "Langevin step η (eq. 36, constant)", "value": f"{params.train.langevin.lr:g}",
             "guideline": "η ≤ min(1, λ/(4σ²)) (Theorem 2)",
             "measured": "; ".join(check(r) for r in rows) + " (σ² at the first and last checkpoint, the larger)"}]


def _trace_text(me: Params) -> str:
    """How tr ∇²L was estimated, from the ``measure`` section."""
    est = "deflated Hutchinson (exact on the Lanczos basis)" if me.trace_estimator == "deflated" else "Hutchinson"
    targets = [f"{k.split('_')[0]} CI ±{100 * me[k]:g}%" for k in ("trace_rel_ci", "psi_rel_ci") if me[k] is not None]
    probes = (f"M ≤ {me.num_probes} Rademacher probes (Stein two-stage, {', '.join(targets)})" if targets
              else f"M = {me.num_probes} Rademacher probes")
    return f"{est}, {probes}"


def _lanczos_text(me: Params) -> str:
    return (f"≤ {me.lanczos_steps} (relative residual ≤ {me.lanczos_tol:g})" if me.lanczos_tol is not None
            else str(me.lanczos_steps))


def _slq_text(me: Params) -> str:
    if me.slq_cdf_tol is None:
        return str(me.slq_probes)
    return f"(≤ {me.slq_probes}: CDF tol {me.slq_cdf_tol:g}, full at {me.full_density})"


def render_hyperparameters(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    return save(None, pd.DataFrame(hyperparameter_rows(params, root)), params, root, name, kind="table")


# --------------------------------------------------------------------------- Table III


def trace_stats(params: Mapping, root) -> pd.DataFrame:
    """Per λ, over all checkpoints and seeds (the paper averages over its checkpoints):

    - ``trace_F_mean`` = mean of tr∇²F = λd + tr∇²L; ``lam_d``; ``trace_L_mean``;
      ``dominant``: the term with the larger magnitude;
    - ``rel_error`` = mean over checkpoints of ``stderr/|tr∇²F|`` (the relative error of the
      M-probe estimate of tr∇²F); ``rel_error_L`` = the same relative to ``|tr∇²L|``;
    - ``ci95_low``/``ci95_high`` = mean over checkpoints of the t-interval of tr∇²F
      (λd + the interval of tr∇²L); ``final_*`` the same at the last checkpoint (seed mean).
    """
    m = measurements(params, root)
    last = checkpoint_steps(params.train)[-1]
    rows = []
    for lam, d in m.groupby("lam"):
        tf = d["laplacian_F"]
        fin = d[d["step"] == last]
        rows.append({
            "dataset": params.data.name, "lam": float(lam), "num_probes": int(d["trace_L_num_probes"].max()),
            "n_checkpoints": int(d["step"].nunique()), "n_seeds": int(d["seed"].nunique()),
            "trace_F_mean": float(tf.mean()), "lam_d": float(d["lam_d"].mean()),
            "trace_L_mean": float(d["trace_L_mean"].mean()),
            "dominant": "λd" if abs(float(d["lam_d"].mean())) > abs(float(d["trace_L_mean"].mean())) else "tr ∇²L",
            "rel_error": float((d["trace_L_stderr"] / tf.abs()).mean()),
            "rel_error_L": float((d["trace_L_stderr"] / d["trace_L_mean"].abs()).mean()),
            "ci95_low": float((d["lam_d"] + d["trace_L_ci95_lo"]).mean()),
            "ci95_high": float((d["lam_d"] + d["trace_L_ci95_hi"]).mean()),
            "final_trace_F": float(fin["laplacian_F"].mean()),
            "final_ci95_low": float((fin["lam_d"] + fin["trace_L_ci95_lo"]).mean()),
            "final_ci95_high": float((fin["lam_d"] + fin["trace_L_ci95_hi"]).mean()),
        })
    return pd.DataFrame(rows)


def render_trace_stats(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    rows = trace_stats(params, root).to_dict("records")
    return save(None, _fmt_frame(rows), params, root, name, kind="table")


# --------------------------------------------------------------------------- efficiency


def default_target(m: pd.DataFrame) -> float:
    """The target perplexity when ``figures.target_ppl`` is null: the largest final
    validation perplexity over all runs, so that every run reaches it (at its last
    checkpoint at the latest) and each λ gets a time."""
    last = m[m["step"] == m["step"].max()]
    return float(last["val_ppl"].max())


def efficiency(params: Mapping, root) -> pd.DataFrame:
    """Per λ: the first checkpoint whose validation perplexity is ≤ the target, and the
    training wall-clock, steps and tokens up to it (mean ± s.e.m. over the seeds that reach
    it). Resolution is the checkpoint spacing: val perplexity exists only at checkpoints."""
    m = measurements(params, root)
    target = params.figures.target_ppl
    source = "figures.target_ppl"
    if target is None:
        target, source = default_target(m), "default: largest final validation perplexity"
    rows = []
    for lam, d in m.groupby("lam"):
        hits = []
        for seed, r in d.groupby("seed"):
            r = r.sort_values("step")
            step = first_reach(r["step"], r["val_ppl"], target)
            if step is not None:
                hits.append(r[r["step"] == step].iloc[0])
        secs = np.array([float(h["wall_clock_s"]) for h in hits])
        last = d[d["step"] == d["step"].max()]
        rows.append({
            "dataset": params.data.name, "lam": float(lam), "target_ppl": target, "target_source": source,
            "n_seeds": int(d["seed"].nunique()), "n_reached": len(hits),
            "wall_clock_s_mean": float(secs.mean()) if len(secs) else None,
            "wall_clock_s_sem": float(secs.std(ddof=1) / math.sqrt(len(secs))) if len(secs) > 1 else None,
            "steps_mean": float(np.mean([h["step"] for h in hits])) if hits else None,
            "tokens_mean": float(np.mean([h["tokens_seen"] for h in hits])) if hits else None,
            "final_val_ppl_mean": float(last["val_ppl"].mean()),
        })
    out = pd.DataFrame([format_row(r) for r in rows])
    for col in ("wall_clock_s_mean", "steps_mean", "tokens_mean"):
        out.loc[out["n_reached"] == "0", col] = "not reached"
    return out


def render_efficiency(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    return save(None, efficiency(params, root), params, root, name, kind="table")

