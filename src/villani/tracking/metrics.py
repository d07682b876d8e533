"""``results/metrics/{dataset}.json``: the headline numbers DVC tracks across versions.

Per variant and λ (averaged over seeds): final training loss, final ‖θ‖², tokens seen
(the training wall-clock goes beside, to ``{dataset}.timings.json``: no engine versions it,
so a rerun that computes the same numbers keeps the same hashes); measurement-based numbers (validation perplexity, Ψ_s, trace, λ_max)
(:func:`measurement_metrics`); from the bounds table, per variant and λ, how many
checkpoints meet each bound's hypotheses and — only over those — the PAC-Bayes tightness
(:func:`bounds_metrics`); and every claim's verdict as a number, 1 supported, 0
inconclusive, −1 refuted (:func:`claims_metrics`; the text is in ``results/claims/{dataset}.csv``).

The builders return nested groups (``{"measurement": {"adamw/lam=0.1": {"psi_s=1.0": …}}}``);
the file is one flat object of numbers (:func:`flat_metrics`), because DVC addresses
metrics by dotted key paths and shows only numbers: each key is the path joined by ``_``
with λ and s written without dots or ``=`` (:func:`metric_key`) —
``<group>[_<variant>]_lam<λ>_<name>``, e.g. ``training_adamw_lam0p1_train_loss``,
``measurement_adamw_lam1em05_psi_s1p0``, ``bounds_langevin_lam1p0_envelope_n_holds``,
``claims_fig7_r2_zero``. A value that is undefined (None, NaN, or a reason such as
PAC-Bayes at λ = 0 or where its hypotheses fail, see ``bounds.json``) is left out, never
written as a number. A new group extends the file the same way: return it nested from a builder.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from villani.claims.verdict import CODES
from villani.io import atomic
from villani.io.results import bounds_summary, checkpoint_table, claims_ledger, measurements
from villani.plan import layout
from villani.plan.runs import runs


def _final_rows(params: Mapping, root, columns: dict[str, str]) -> dict:
    """Per variant and λ, the mean over seeds of the last checkpoint's ``columns`` ({name: column})."""
    out: dict = {}
    for r in runs(params):
        last = checkpoint_table(params, r, root).iloc[-1]
        out.setdefault(f"{r.variant}/lam={layout.format_lam(r.lam)}", []).append(
            {name: float(last[col]) for name, col in columns.items()})
    return {k: {m: float(np.mean([v[m] for v in vals])) for m in columns} for k, vals in out.items()}


def training_metrics(params: Mapping, root) -> dict:
    """Final training loss, ‖θ‖² and tokens seen (wall-clock seconds: :func:`timing_metrics`)."""
    return _final_rows(params, root, {"train_loss": "train_loss", "theta_sq_norm": "theta_sq_norm",
                                      "tokens_seen": "tokens_seen"})


def timing_metrics(params: Mapping, root) -> dict:
    """Training wall-clock seconds per variant and λ: no result of the run (a rerun differs), so
    kept out of the tracked metrics, in ``results/metrics/{dataset}.timings.json``, which no
    engine versions."""
    return {"training": _final_rows(params, root, {"train_seconds": "wall_clock_s"})}


def _numbers(d: dict) -> dict:
    """The entries of ``d`` that are numbers (None, text and NaN left out)."""
    return {k: v for k, v in d.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(float(v))}


def bounds_metrics(params: Mapping, root) -> dict:
    """Per variant and λ > 0 from ``bounds.json``: checkpoints, and how many meet the
    hypotheses of Theorem 2, of the envelope (and at how many it holds / is violated) and of
    the PAC-Bayes bound; the PAC-Bayes mean and final bound/perplexity ratio, R² and Pearson r
    over the checkpoints that meet its hypotheses (left out when none does). Empty when the
    bounds stage has not run."""
    if not layout.fmt(layout.BOUNDS_JSON, root, dataset=params["data"]["name"]).exists():
        return {}
    summary = bounds_summary(params, root)["summary"]  # a damaged or stale one stops the stage
    out: dict = {}
    for variant, per_lam in summary.items():
        for lam, entry in per_lam.items():
            if entry["status"] != "ok":
                continue
            pb, env, t2 = entry["pac_bayes"], entry["envelope"], entry["theorem2"]
            out[f"{variant}/lam={lam}"] = _numbers({
                "n_checkpoints": t2["n_checkpoints"], "theorem2_n_applicable": t2["n_applicable"],
                "envelope_n_applicable": env["n_applicable"], "envelope_n_holds": env["n_holds"],
                "envelope_n_violated": env["n_violated"], "pac_bayes_n_applicable": pb["n_applicable"],
                "pac_bayes_n_vacuous": pb["n_vacuous"], "pac_bayes_mean_ratio": pb["mean_ratio"],
                "pac_bayes_final_ratio": pb["final_ratio"], "pac_bayes_r2": pb["r2"],
                "pac_bayes_pearson_r": pb["pearson_r"]})
    return {"bounds": out}


def claims_metrics(params: Mapping, root) -> dict:
    """``{"claims": {<id>: 1 | 0 | −1, …, "n_supported": …}}`` from the dataset's
    ``claims/{dataset}.json`` (checked: :func:`villani.io.results.claims_ledger`); empty when
    the claims stage has not run."""
    if not layout.fmt(layout.CLAIMS_JSON, root, dataset=params["data"]["name"]).exists():
        return {}
    doc = claims_ledger(params, root)
    out = {c["id"]: CODES[c["verdict"]] for c in doc["claims"]}
    out.update({f"n_{v.replace(' ', '_')}": sum(c["verdict"] == v for c in doc["claims"]) for v in CODES})
    return {"claims": out}


def _mean(values) -> float | None:
    """The mean over every seed, or None (left out of the file) when any seed's value is
    undefined: a mean over the seeds that happen to have a value would be reported beside
    ``n_seeds`` as if all had one."""
    vals = [None if v is None else float(v) for v in values]
    if not vals or any(v is None or not np.isfinite(v) for v in vals):
        return None
    return float(np.mean(vals))


def measurement_metrics(params: Mapping, root=layout.RESULTS) -> dict:
    """Headline numbers per variant and λ at the last checkpoint, mean over seeds.

    ``{"measurement": {"<variant>/lam=<λ>": {val_ppl, psi_s=<s>…, trace_L, laplacian_F, lam_d,
    lambda_max, spectral_ratio, grad_noise_sigma_sq, n_seeds}}}``: means over all ``n_seeds``
    seeds, ``None`` (left out of the file) when any seed's value is undefined (e.g. the ratio
    for λ_median ≤ 0); λ with no measurement yet are left out. A value that cannot be read
    stops the stage (:func:`villani.io.results.measurements`).
    """
    df = measurements(params, root, variants=None, missing_ok=True)
    out: dict = {}
    if df.empty:
        return {"measurement": out}
    last = df[df["step"] == params["train"]["steps"]]
    psi_cols = [c for c in df.columns if c.startswith("psi_s=") and "_ci95" not in c]
    for (variant, lam), g in last.groupby(["variant", "lam"], sort=False):
        entry = {"val_ppl": _mean(g["val_ppl"]), "trace_L": _mean(g["trace_L_mean"]),
                 "laplacian_F": _mean(g["laplacian_F"]), "lam_d": _mean(g["lam_d"]),
                 "lambda_max": _mean(g["lambda_max"]), "spectral_ratio": _mean(g["spectral_ratio"]),
                 "grad_noise_sigma_sq": _mean(g["grad_noise_sigma_sq"]), "n_seeds": int(g["seed"].nunique())}
        entry.update({c: _mean(g[c]) for c in psi_cols})
        out[f"{variant}/lam={layout.format_lam(lam)}"] = entry
    return {"measurement": out}


_KEY_CHARS = str.maketrans({".": "p", "-": "m", "=": "", "+": "", "/": "_", " ": "_"})


def metric_key(*path: str) -> str:
    """A flat metrics key from a nested path: ``("measurement", "lam=1e-05", "psi_s=1.0")``
    → ``measurement_lam1em05_psi_s1p0`` (``.`` → ``p``, ``-`` → ``m``; ``=``, ``+`` dropped;
    ``/`` → ``_``)."""
    return "_".join(str(p).translate(_KEY_CHARS) for p in path)


def flat_metrics(nested: Mapping, prefix: tuple = ()) -> dict[str, float | int]:
    """Flatten nested groups to ``{metric_key(*path): number}``, leaving out what is not a
    finite number (None, NaN, ±inf, strings such as ``"undefined"``)."""
    out: dict = {}
    for k, v in nested.items():
        if isinstance(v, Mapping):
            out.update(flat_metrics(v, prefix + (k,)))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v):
            key = metric_key(*prefix, k)
            if key in out:
                raise ValueError(f"metrics: two entries map to the key {key!r}")
            out[key] = v
    return out


def write_metrics(params: Mapping, root=layout.RESULTS) -> str:
    ds = params["data"]["name"]
    nested = {"training": training_metrics(params, root)}
    nested.update(measurement_metrics(params, root))
    nested.update(bounds_metrics(params, root))
    nested.update(claims_metrics(params, root))
    path = layout.fmt(layout.METRICS, root, dataset=ds)
    atomic.write_json(path, flat_metrics(nested))
    atomic.write_json(layout.fmt(layout.TIMINGS, root, dataset=ds), flat_metrics(timing_metrics(params, root)))
    return str(path)
