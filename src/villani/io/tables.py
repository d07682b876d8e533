"""The tables the stages exchange, checked before a number is computed from them.

:func:`columns` checks that a table (a CSV a stage wrote, a measure Parquet) holds the
columns a reader needs, each of its kind; :func:`measure_samples` the raw samples of a
measurement; :func:`step_log` a training segment's per-step log. Each returns what it was
given or raises a one-line ``ValueError`` naming the file, the column (and row) and what is
allowed — the same form as a record's error (:func:`villani.io.records.check`).
:func:`after_start` selects the checkpoints of a measurement table that every correlation over
checkpoints uses (the claims ledger's and the figures'): those after each run's first.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

__all__ = ["SAMPLE_COLUMNS", "columns", "measure_samples", "step_log", "after_start"]

SAMPLE_COLUMNS = {"kind": "text", "probe": "integer", "index": "integer", "block": "text", "value": "number",
                  "weight": "number"}


def _invalid(path, field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: {json.dumps(value, default=str)[:60]} is invalid (expected {expected})")


def columns(df, path, required: Mapping[str, str]):
    """A table holds ``required`` columns, each of its kind (``number``, ``integer``, ``text``)."""
    from pandas.api import types

    for col, kind in required.items():
        if col not in df.columns:
            raise ValueError(f"{path}: column {col!r} missing (expected columns {', '.join(required)}; "
                             f"found {', '.join(map(str, df.columns))})"[:400])
        ok = {"number": types.is_numeric_dtype, "integer": types.is_integer_dtype,
              "text": lambda s: types.is_string_dtype(s) or types.is_object_dtype(s)}[kind](df[col])
        if ok and kind == "number" and types.is_bool_dtype(df[col]):
            ok = False
        if not ok:
            raise _invalid(path, f"column {col}", str(df[col].dtype), f"{kind} values")
    return df


def measure_samples(df, path):
    """A measure Parquet: the columns of :data:`SAMPLE_COLUMNS` with their kinds, no NaN value."""
    columns(df, path, {k: v for k, v in SAMPLE_COLUMNS.items() if k != "block"})
    bad = df["value"].isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _invalid(path, f"value[{i}] (kind {df['kind'].iloc[i]})", None, "a number")
    return df


def step_log(df, path, *, start: int, end: int):
    """A training segment's per-step log (start, end]: integer ``step`` = start+1 … end, once
    each and in order; ``skipped`` 0 or 1; every other column numeric and finite, except
    ``loss`` on a skipped step and ``grad_norm`` (a clipped gradient's norm may be inf). A
    row written by another process, a block of NULs, a lost row: one line naming the row."""
    columns(df, path, {"step": "integer"})
    steps = df["step"].to_numpy()
    want = np.arange(int(start) + 1, int(end) + 1)
    if len(steps) != len(want) or (steps != want).any():
        i = next((i for i, (a, b) in enumerate(zip(steps, want)) if a != b), min(len(steps), len(want)))
        what = (f"step {steps[i]}, expected step {want[i]}" if i < min(len(steps), len(want)) else
                f"no row, expected step {want[i]}" if i < len(want) else f"step {steps[i]} after the last step {end}")
        raise ValueError(f"{path}: row {i + 1}: {what} (steps {start + 1}…{end} once each, in order: a damaged "
                         "log, or two processes wrote it)")
    columns(df, path, {"loss": "number", "skipped": "integer"})
    skipped = df["skipped"].to_numpy()
    if not np.isin(skipped, (0, 1)).all():
        i = int(np.flatnonzero(~np.isin(skipped, (0, 1)))[0])
        raise _invalid(path, f"row {i + 1} (step {steps[i]}): skipped", int(skipped[i]), "0 or 1")
    for col in df.columns:
        if col in ("step", "skipped", "grad_norm"):
            continue
        columns(df, path, {col: "number"})
        bad = ~np.isfinite(df[col].to_numpy(dtype=float))
        if col == "loss":
            bad &= skipped == 0
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _invalid(path, f"row {i + 1} (step {steps[i]}): {col}", float(df[col].iloc[i]), "a finite number")
    return df


def after_start(df):
    """The checkpoints after each run's first: a correlation over checkpoints leaves out step 0,
    where every run is its initialisation (perplexity ≈ V, the same θ at every λ)."""
    first = df.groupby(["variant", "lam", "seed"])["step"].transform("min")
    return df[df["step"] > first].reset_index(drop=True)
