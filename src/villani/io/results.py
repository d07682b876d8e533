"""The one reader of what the stages wrote: data stats, checkpoints' metadata, training
logs, measurements, rays, landscapes, bounds and the cost sweep.

Each reader takes the params and the results root (or a folder), finds its files through
:mod:`villani.plan.layout` and :mod:`villani.plan.runs`, and returns plain dicts or
DataFrames. A missing, corrupt or ill-typed file is a one-line ``ValueError`` naming it
and the field (the CLI prints it): every reader checks what it returns — a JSON record
against its shipped schema (:func:`villani.io.records.check`; a measure JSON also by
:mod:`villani.io.measure_record`: its λ/seed/step those of its path, its precision audit),
a table's columns (:mod:`villani.io.tables`) — so no stage computes a number from a value
it could not read.

**Measurements.** :func:`measurements` returns one row per measured checkpoint with flat
columns, generated from the measure schema by :func:`villani.io.measure_record.measurement_row`
(the keys the schema requires, flattened one level: ``trace_L_mean``, ``psi_s=1.0``,
``lambda_median_ci95_lo``, …; ``docs/records.md``), plus ``top_k`` and ``lambda_max_residual``
(the Ritz residual of λ_max).

:func:`measure_samples` reads a checkpoint's Parquet (raw Hutchinson samples, SLQ nodes,
…), optionally one ``kind``; :func:`run_records` the raw JSON dicts grouped by run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from villani.io import atomic, measure_record, provenance, records, tables
from villani.io.measure_record import MEASURE_LABELS, MEASURE_SCALARS, ROW_COLUMNS, TRACE_FIELDS, measurement_row
from villani.plan import layout
from villani.plan.runs import Run, runs
from villani.plan.runs import variants as variant_names
from villani.plan.schedule import checkpoint_steps, measured_steps, segment_ends
from villani.plan.writers import how_to_rewrite

__all__ = [
    "MEASURE_SCALARS", "MEASURE_LABELS", "TRACE_FIELDS",
    "read_stats", "data_stats", "current_stats", "train_tokens", "vocabulary",
    "read_checkpoint_meta", "checkpoint_table", "training_log",
    "is_doubly_stochastic", "measure_paths", "read_measure", "checked_measure", "measurement_hashes", "measurement_row",
    "measurements", "measure_samples", "run_records", "record_inputs", "claims_ledger",
    "eigen_frame", "trace_samples",
    "rays_table", "landscape_surface", "bounds_summary", "bounds_frame", "cost_table",
]

# --------------------------------------------------------------------------- missing files
# how to get a file back: the command that writes it (villani.plan.writers), which the
# messages below end with


def _read_json(path, what: str) -> Any:
    """:func:`villani.io.atomic.read_json`; a missing file says which command writes it."""
    if not Path(path).exists():
        raise ValueError(f"{path}: {what} not found; {how_to_rewrite(path, missing=True)}")
    return atomic.read_json(path, what)


# --------------------------------------------------------------------------- data stats


def read_stats(data_dir: str | Path) -> dict[str, Any]:
    """The ``stats.json`` of a data folder (written by :func:`villani.data.tokenize`), checked
    against its schema and its ``eos_token_id`` below ``vocab_size``."""
    path = Path(data_dir) / layout.DATA_STATS_FILE
    stats = records.check("data_stats", _read_json(path, "data stats"), path)
    if stats["eos_token_id"] is not None and stats["eos_token_id"] >= stats["vocab_size"]:
        raise ValueError(f"{path}: eos_token_id: {stats['eos_token_id']} is invalid (expected an integer in "
                         f"[0, {stats['vocab_size'] - 1}], below vocab_size)")
    return stats


def data_stats(params: Mapping, root) -> dict[str, Any]:
    """``results/data/{dataset}/stats.json`` of the params' dataset."""
    return read_stats(layout.fmt(layout.DATA_DIR, root, dataset=params["data"]["name"]))


def current_stats(params: Mapping, root) -> tuple[dict | None, str]:
    """(``stats.json`` of the params' dataset, "") when it was written under the data
    parameters asked now (its ``seq_len``, ``source`` and ``revision``), else (None, why
    not): numbers derived from a stale file — blocks, epochs — would be of other data."""
    path = layout.fmt(layout.DATA_STATS, root, dataset=params["data"]["name"])
    if not path.exists():
        return None, f"{path} not written yet"
    stats = read_stats(path.parent)
    d = params["data"]
    stale = [f"data.{k}: {stats[k]!r} there, {d.get(k)!r} here" for k in ("seq_len", "source", "revision")
             if stats[k] != d.get(k)]
    return (None, f"{path} is of other data parameters ({'; '.join(stale)})") if stale else (stats, "")


def train_tokens(stats: Mapping) -> int:
    """Tokens in the train split (the PAC-Bayes n)."""
    try:
        return int(stats["splits"]["train"]["tokens"])
    except (KeyError, TypeError):
        raise ValueError("data stats lack splits.train.tokens") from None


def vocabulary(stats: Mapping) -> tuple[int, int | None]:
    """(vocabulary size, EOS token id or None) of a tokenized dataset."""
    return int(stats["vocab_size"]), stats["eos_token_id"]


# --------------------------------------------------------------------------- training


def read_checkpoint_meta(path: str | Path) -> dict:
    """A checkpoint's JSON metadata (not verified against its files: see
    :func:`villani.training.checkpoint.read_meta`)."""
    return records.check("checkpoint", _read_json(path, "checkpoint metadata"), path)


def checkpoint_table(params: Mapping, run: Run, root="results") -> pd.DataFrame:
    """One row per checkpoint of a run, from the checkpoint JSONs — each the one its segment
    manifest recorded (sha256): an edited ``train_loss``, or a checkpoint of a segment that
    did not finish, is one line naming the file."""
    recorded: dict = {}
    for end in segment_ends(params["train"]):
        path = run.path(layout.SEGMENT, root, step=end)
        doc = records.check("segment", _read_json(path, "segment manifest"), path)
        recorded.update({e["step"]: e["meta_sha256"] for e in doc["checkpoints"]})
    rows = []
    for s in checkpoint_steps(params["train"]):
        path = run.path(layout.CKPT_META, root, step=s)
        rows.append(read_checkpoint_meta(path))
        if recorded.get(s) != atomic.sha256_file(path):
            raise ValueError(f"{path}: not the checkpoint.json its segment manifest recorded (edited, or its segment "
                             f"did not finish); {how_to_rewrite(path, params)}")
    return pd.DataFrame(rows)


def training_log(params: Mapping, run: Run, root="results") -> pd.DataFrame:
    """The per-step log of a run, all segments concatenated in step order; each segment's
    steps once each and in order, its values finite (:func:`villani.io.tables.step_log`)."""
    ends = segment_ends(params["train"])
    frames = [tables.step_log(_read_table(run.path(layout.SEGMENT_LOG, root, step=e), "training log", "step_log",
                                          checked=False),
                              run.path(layout.SEGMENT_LOG, root, step=e), start=s, end=e)
              for s, e in zip([0] + ends[:-1], ends)]
    return pd.concat(frames, ignore_index=True).sort_values("step").reset_index(drop=True)


# --------------------------------------------------------------------------- measurements

def is_doubly_stochastic(estimator) -> bool:
    """Whether a record's ``trace_L.estimator`` is the doubly stochastic one (``measure.ds_blocks``):
    its samples are group means, and it has no ‖∇²L‖_F² (``frob_sq`` null)."""
    return isinstance(estimator, str) and estimator.startswith("doubly stochastic")


def measure_paths(params: Mapping, root=layout.RESULTS, variants: Iterable[str] | None = ("adamw",)
                  ) -> Iterator[tuple[Run, int, Path]]:
    """(run, step, json path) of every checkpoint measurement of the runs of ``variants``
    (``None``: every variant), at the checkpoints each run is measured at
    (:func:`~villani.plan.schedule.measured_steps`)."""
    for r in runs(params, None if variants is None else tuple(variants)):
        for s in measured_steps(params, r.variant):
            yield r, s, r.path(layout.MEASURE_JSON, root, step=s)


def read_measure(path: str | Path, run: Run | None = None, step: int | None = None) -> dict:
    """A measure JSON, checked against its schema (:func:`villani.io.records.check`) and
    :mod:`villani.io.measure_record` (with ``run`` and ``step``, its λ, seed, step and
    variant must be theirs; its precision audit) and its ``record_sha256`` against
    its content (:func:`villani.io.records.check_sealed`): a one-line ValueError naming the
    file and field when missing, corrupt, ill-typed, NaN or edited."""
    rec = _read_json(path, "measurement")
    ident = {} if run is None else dict(lam=run.lam, seed=run.seed, variant=run.variant)
    records.check("measure", rec, path)
    measure_record.check_identity(rec, path, step=step, **ident)
    measure_record.check_precision_audit(rec, path)
    records.check_sealed(rec, path, "measurement", how_to_rewrite(path))
    return rec


def checked_measure(params: Mapping, root, run: Run, step: int, path) -> dict:
    """:func:`read_measure`, and the links it relies on (:func:`villani.io.provenance.check_measure_links`:
    the run's checkpoint now, trained and measured under ``params``)."""
    rec = read_measure(path, run, step)
    meta_path = run.path(layout.CKPT_META, root, step=step)
    meta = read_checkpoint_meta(meta_path) if meta_path.exists() else None
    provenance.check_measure_links(rec, path, params, run, meta, meta_path)
    return rec


def measurement_hashes(params: Mapping, root) -> dict[str, str]:
    """``{path under root: record_sha256}`` of every measure JSON of every variant's runs that
    exists, each checked (:func:`checked_measure`): what a record computed from them names."""
    return {Path(path).relative_to(Path(root)).as_posix():
            checked_measure(params, root, run, step, path)[records.RECORD_HASH]
            for run, step, path in measure_paths(params, root, None) if path.exists()}


def measurements(params: Mapping, root=layout.RESULTS, *, variants: Iterable[str] | None = ("adamw",),
                 missing_ok: bool = False) -> pd.DataFrame:
    """One row per measured checkpoint of the runs of ``variants`` (``None``: every variant;
    see the module docstring), sorted by variant (in the order of
    :func:`villani.plan.runs.variants`), λ, seed, step.

    A missing measurement is a one-line ``ValueError`` naming it, unless ``missing_ok``
    (then it is skipped).
    """
    rows = []
    for run, step, path in measure_paths(params, root, variants):
        if not path.exists():
            if missing_ok:
                continue
            raise ValueError(f"{path}: measurement not found; {how_to_rewrite(path, missing=True)}")
        rows.append(measurement_row(checked_measure(params, root, run, step, path), path))
    if not rows:
        return pd.DataFrame(columns=[*ROW_COLUMNS, "path", "top_k", "lambda_max_residual"])
    order = {v: i for i, v in enumerate(variant_names(params))}  # AdamW first, the Langevin arm last
    df = pd.DataFrame(rows).sort_values(
        ["variant", "lam", "seed", "step"],
        key=lambda c: c.map(lambda v: order.get(v, len(order))) if c.name == "variant" else c,
    ).reset_index(drop=True)
    df["top_k"] = df["top_eigenvalues"].map(len)
    df["lambda_max_residual"] = df["top_residuals"].map(lambda r: float(r[0]) if len(r) else np.nan)
    for col in df.columns:
        if ROW_COLUMNS.get(col) == "number" or col.startswith("psi_s="):
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def measure_samples(params: Mapping, root=layout.RESULTS, *, variant: str = "adamw", lam: float, seed: int,
                    step: int, kind: str | None = None) -> pd.DataFrame:
    """The raw samples of one checkpoint (the table ``measure_samples``: columns ``kind, probe,
    index, block, value, weight``; what each kind is: its schema, ``docs/records.md``)."""
    path = layout.fmt(layout.MEASURE_PARQUET, root, dataset=params["data"]["name"], variant=variant, lam=lam,
                      seed=seed, step=step)
    if not path.exists():
        raise ValueError(f"{path}: measurement samples not found; {how_to_rewrite(path, missing=True)}")
    df = _read_table(path, "measurement samples", "measure_samples")
    return df if kind is None else df[df["kind"] == kind].reset_index(drop=True)


def run_records(params: Mapping, root, variants: Iterable[str] | None = None) -> dict[Run, list[dict]]:
    """The measurement JSON dicts of every run of ``variants`` (``None``: every variant), per
    run in step order (the bounds need each run's checkpoints together); each dict carries
    its ``_path``."""
    out: dict[Run, list[dict]] = {}
    for run, step, path in measure_paths(params, root, variants):
        rec = checked_measure(params, root, run, step, path)
        out.setdefault(run, []).append(dict(rec, dataset=run.dataset, variant=run.variant, _path=str(path)))
    return out


def eigen_frame(m: pd.DataFrame) -> pd.DataFrame:
    """Long table of the top eigenvalues: variant, lam, seed, step, theta_sq_norm, rank, eigenvalue, residual."""
    rows = []
    for r in m.itertuples():
        res = list(r.top_residuals)
        for i, ev in enumerate(r.top_eigenvalues):
            rows.append({"variant": r.variant, "lam": float(r.lam), "seed": int(r.seed),
                         "step": int(r.step), "theta_sq_norm": float(r.theta_sq_norm), "rank": i + 1,
                         "eigenvalue": float(ev),
                         "residual": float(res[i]) if i < len(res) and res[i] is not None else np.nan})
    return pd.DataFrame(rows, columns=["variant", "lam", "seed", "step", "theta_sq_norm", "rank", "eigenvalue",
                                       "residual"])


def trace_samples(params: Mapping, run: Run, step: int, root) -> np.ndarray:
    """The M Hutchinson samples vᵀ∇²L v of one checkpoint (kind ``trace_L`` of its Parquet)."""
    df = measure_samples(params, root, variant=run.variant, lam=run.lam, seed=run.seed, step=step, kind="trace_L")
    if df.empty:
        raise ValueError(f"{run.path(layout.MEASURE_PARQUET, root, step=step)}: no trace_L samples")
    return df.sort_values("probe")["value"].to_numpy(dtype=float)


# --------------------------------------------------------------------------- other stages


def rays_table(params: Mapping, root) -> tuple[pd.DataFrame, dict]:
    """``rays.csv`` and ``slopes.json`` of the dataset."""
    samples, slopes = (layout.fmt(f, root, dataset=params["data"]["name"]) for f in (layout.RAYS_CSV, layout.RAYS_SLOPES))
    if not samples.exists():
        raise ValueError(f"{samples}: radial-ray samples not found; {how_to_rewrite(samples, missing=True)}")
    return _read_table(samples, "radial-ray samples", "rays"), records.check("ray_slopes", _read_json(slopes, "ray slopes"),
                                                                        slopes)


def landscape_surface(params: Mapping, lam: float, root) -> tuple[pd.DataFrame, dict]:
    """``surface.csv`` and ``surface.json`` of one λ."""
    surface, meta = (layout.fmt(f, root, dataset=params["data"]["name"], lam=lam)
                     for f in (layout.SURFACE_CSV, layout.SURFACE_JSON))
    if not surface.exists():
        raise ValueError(f"{surface}: loss surface not found; {how_to_rewrite(surface, missing=True)}")
    return _read_table(surface, "loss surface", "surface"), records.check("surface", _read_json(meta, "surface metadata"),
                                                                 meta)


def bounds_summary(params: Mapping, root) -> dict:
    """``bounds.json`` of the dataset (rows and per-λ summary, see :mod:`villani.bounds.table`),
    its ``record_sha256`` checked and the measure JSONs it names those under ``root`` now."""
    path = layout.fmt(layout.BOUNDS_JSON, root, dataset=params["data"]["name"])
    doc = records.check("bounds", _read_json(path, "bounds summary"), path)
    records.check_sealed(doc, path, "bounds summary", how_to_rewrite(path))
    provenance.check_inputs(doc, path, measurement_hashes(params, root), None, root, "bounds summary",
                            how_to_rewrite(path))
    return doc


def record_inputs(params: Mapping, root) -> dict:
    """What a record computed from the dataset's results names as its inputs: the measure
    JSONs by ``record_sha256`` (:func:`measurement_hashes`) and ``bounds.json``'s (null
    where there is none); :func:`claims_ledger` checks them."""
    bounds = layout.fmt(layout.BOUNDS_JSON, root, dataset=params["data"]["name"])
    return {"measurements": measurement_hashes(params, root),
            "bounds_sha256": bounds_summary(params, root)[records.RECORD_HASH] if bounds.exists() else None}


def claims_ledger(params: Mapping, root) -> dict:
    """``claims/{dataset}.json`` (:mod:`villani.claims.reporting.ledger`), its ``record_sha256`` checked
    and the measure JSONs and bounds.json it names those under ``root`` now."""
    path = layout.fmt(layout.CLAIMS_JSON, root, dataset=params["data"]["name"])
    doc = records.check("claims", _read_json(path, "claims ledger"), path)
    records.check_sealed(doc, path, "claims ledger", how_to_rewrite(path))
    bounds = doc["inputs"]["bounds_sha256"] and bounds_summary(params, root)[records.RECORD_HASH]
    provenance.check_inputs(doc, path, measurement_hashes(params, root), bounds, root, "claims ledger",
                            how_to_rewrite(path))
    return doc


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
    """A JSON number (also the "inf"/"-inf" strings :func:`villani.io.atomic.write_json` writes); None → NaN."""
    return np.nan if x is None else float(x)


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return v in ("inf", "-inf")


def cost_table(params: Mapping, root) -> pd.DataFrame:
    """``results/cost/{dataset}/hvp_cost.csv`` (the HVP cost sweep of Fig 10)."""
    path = layout.fmt(layout.COST_CSV, root, dataset=params["data"]["name"])
    if not Path(path).exists():
        raise ValueError(f"{path}: HVP cost sweep not found; {how_to_rewrite(path, missing=True)}")
    return _read_table(path, "HVP cost sweep", "hvp_cost")


def _read_table(path, what: str, name: str, *, checked: bool = True) -> pd.DataFrame:
    """A table a stage wrote, checked against its schema ``name`` (:func:`villani.io.tables.read`);
    a missing one says which command writes it."""
    try:
        return tables.read(name, path, what, checked=checked)
    except FileNotFoundError:
        raise ValueError(f"{path}: {what} not found; {how_to_rewrite(path, missing=True)}") from None
