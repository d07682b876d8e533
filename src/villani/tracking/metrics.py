"""What the ``metrics`` stage tracks: a few headline numbers for DVC, the rest as a table.

``results/metrics/{dataset}.json`` — the numbers ``dvc exp show`` and ``dvc metrics diff``
compare, a handful per experiment (:func:`headline_metrics`): the claims ledger's count of
claims per verdict, and per variant and λ the final validation perplexity and Ψ_s at the
first ``measure.s_values`` (mean over seeds) — the two quantities of the paper's Fig 7.
Nested as DVC nests metrics: ``claims.refuted``, ``adamw.lam0p012.val_ppl``,
``adamw.lam0p012.psi_s1p0`` (λ and s written without dots or ``=``, :func:`metric_key`:
DVC addresses a metric by its dotted path). 19 numbers for the shipped ``params.yaml``.

``results/metrics/{dataset}.csv`` — every number per variant and λ (:func:`metrics_table`):
final training loss, ‖θ‖² and tokens seen (:func:`training_metrics`); validation perplexity,
Ψ_s, the trace, ΔF, λd, λ_max, the spectral ratio and σ² at the last checkpoint
(:func:`measurement_metrics`); per λ > 0 how many checkpoints meet each bound's hypotheses
and — only over those — the PAC-Bayes tightness (:func:`bounds_metrics`). Each claim's
verdict is in the ledger, ``results/claims/{dataset}.csv``. The training wall-clock goes
beside, to ``{dataset}.timings.json`` (:func:`timing_metrics`): no engine versions it, so a
rerun that computes the same numbers keeps the same hashes.

A value that is undefined (None, NaN, or a reason such as PAC-Bayes at λ = 0 or where its
hypotheses fail, see ``bounds.json``) is left out of the JSON and empty in the table, never
written as a number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np

from villani.claims.catalogue.verdict import CODES
from villani.io import atomic
from villani.io.results import bounds_summary, checkpoint_table, claims_ledger, measurements
from villani.plan import layout
from villani.plan.runs import runs
from villani.diagnostics.psi import psi_column

if TYPE_CHECKING:
    import pandas as pd


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


def _number(v) -> int | float | None:
    """``v`` when it is a finite number, else None (text such as a reason, NaN, ±inf, None)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(float(v)) else None


def bounds_metrics(params: Mapping, root) -> dict:
    """Per variant and λ > 0 from ``bounds.json``: checkpoints, and how many meet the
    hypotheses of Theorem 2, of the envelope (and at how many it holds / is violated) and of
    the PAC-Bayes bound; the PAC-Bayes mean and final bound/perplexity ratio, R² and Pearson r
    over the checkpoints that meet its hypotheses (None, or the reason, when none does). Empty
    when the bounds stage has not run."""
    if not layout.fmt(layout.BOUNDS_JSON, root, dataset=params["data"]["name"]).exists():
        return {}
    summary = bounds_summary(params, root)["summary"]  # a damaged or stale one stops the stage
    out: dict = {}
    for variant, per_lam in summary.items():
        for lam, entry in per_lam.items():
            if entry["status"] != "ok":
                continue
            pb, env, t2 = entry["pac_bayes"], entry["envelope"], entry["theorem2"]
            out[f"{variant}/lam={lam}"] = {
                "n_checkpoints": t2["n_checkpoints"], "theorem2_n_applicable": t2["n_applicable"],
                "envelope_n_applicable": env["n_applicable"], "envelope_n_holds": env["n_holds"],
                "envelope_n_violated": env["n_violated"], "pac_bayes_n_applicable": pb["n_applicable"],
                "pac_bayes_n_vacuous": pb["n_vacuous"], "pac_bayes_mean_ratio": pb["mean_ratio"],
                "pac_bayes_final_ratio": pb["final_ratio"], "pac_bayes_r2": pb["r2"],
                "pac_bayes_pearson_r": pb["pearson_r"]}
    return {"bounds": out}


def claims_metrics(params: Mapping, root) -> dict:
    """``{"claims": {<verdict>: count, …}}``: the paper's claims per verdict in the dataset's
    ``claims/{dataset}.json`` (checked: :func:`villani.io.results.claims_ledger`; our
    findings are not counted); empty when the claims stage has not run."""
    if not layout.fmt(layout.CLAIMS_JSON, root, dataset=params["data"]["name"]).exists():
        return {}
    doc = claims_ledger(params, root)
    return {"claims": {v.replace(" ", "_"): sum(c["verdict"] == v for c in doc["claims"]) for v in CODES}}


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
    """A DVC-safe metrics key from a path (one component: one key of the nested JSON): ``("measurement", "lam=1e-05", "psi_s=1.0")``
    → ``measurement_lam1em05_psi_s1p0`` (``.`` → ``p``, ``-`` → ``m``; ``=``, ``+`` dropped;
    ``/`` → ``_``)."""
    return "_".join(str(p).translate(_KEY_CHARS) for p in path)


def flat_metrics(nested: Mapping, prefix: tuple = ()) -> dict[str, float | int]:
    """Flatten nested groups to ``{metric_key(*path): number}`` (the timings file), leaving out
    what is not a finite number (None, NaN, ±inf, strings such as ``"undefined"``)."""
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


def nested_metrics(nested: Mapping) -> dict:
    """``nested`` with each key written DVC-safe (:func:`metric_key`), what is not a finite
    number (None, NaN, ±inf, strings such as ``"undefined"``) and groups left empty dropped."""
    out: dict = {}
    for k, v in nested.items():
        if isinstance(v, Mapping):
            v = nested_metrics(v)
            if not v:
                continue
        elif not (isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)):
            continue
        key = metric_key(k)
        if key in out:
            raise ValueError(f"metrics: two entries map to the key {key!r}")
        out[key] = v
    return out


def headline_metrics(params: Mapping, root=layout.RESULTS, measurement: Mapping | None = None) -> dict:
    """``{"claims": {<verdict>: count}, <variant>: {"lam<λ>": {"val_ppl", "psi_s<s>"}}}``: the
    ledger's counts and, per variant and λ, the final validation perplexity and Ψ_s at the
    first ``measure.s_values`` (means over seeds, :func:`measurement_metrics`; ``measurement``:
    its ``"measurement"`` part when the caller has read it)."""
    psi = psi_column(params["measure"]["s_values"][0])
    if measurement is None:
        measurement = measurement_metrics(params, root)["measurement"]
    out: dict = {}
    for key, entry in measurement.items():
        variant, lam = key.split("/")
        out.setdefault(variant, {})[lam] = {"val_ppl": entry["val_ppl"], psi: entry.get(psi)}
    return nested_metrics({**claims_metrics(params, root), **out})


def metrics_table(params: Mapping, root=layout.RESULTS, measurement: Mapping | None = None) -> pd.DataFrame:
    """One row per variant and λ (``variant``, ``lam``), a column per number of
    :func:`training_metrics`, :func:`measurement_metrics` (``measurement``: its
    ``"measurement"`` part when the caller has read it) and :func:`bounds_metrics`; empty
    where a number is undefined."""
    import pandas as pd

    if measurement is None:
        measurement = measurement_metrics(params, root)["measurement"]
    groups = [training_metrics(params, root), measurement,
              bounds_metrics(params, root).get("bounds", {})]
    rows: dict = {}
    for group in groups:
        for key, entry in group.items():
            rows.setdefault(key, {}).update({k: _number(v) for k, v in entry.items()})
    records = [{"variant": key.split("/")[0], "lam": key.split("lam=")[1], **values} for key, values in rows.items()]
    table = pd.DataFrame.from_records(records)
    table = table.astype({c: "float64" for c in table.columns[2:]})
    counts = [c for c in table.columns[2:] if (table[c].dropna() % 1 == 0).all()]  # counts: no ".0" in the CSV
    return table.astype({c: "Int64" for c in counts})


def write_metrics(params: Mapping, root=layout.RESULTS) -> str:
    """Write the headline JSON, the table and the timings of the params' dataset (every
    measure JSON read and checked once, for both)."""
    ds = params["data"]["name"]
    path = layout.fmt(layout.METRICS, root, dataset=ds)
    measurement = measurement_metrics(params, root)["measurement"]
    atomic.write_json(path, headline_metrics(params, root, measurement))
    atomic.write_text(layout.fmt(layout.METRICS_TABLE, root, dataset=ds),
                      metrics_table(params, root, measurement).to_csv(index=False))
    atomic.write_json(layout.fmt(layout.TIMINGS, root, dataset=ds), flat_metrics(timing_metrics(params, root)))
    return str(path)
