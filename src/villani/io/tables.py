"""The tables the stages exchange, checked on write and on read against their shipped schemas.

**What a table holds** is its schema, package data ``villani/schemas/<name>.table.yaml``
(:data:`TABLES`): the JSON Schema of one row — ``properties`` its columns in the order they
are written, ``patternProperties`` the columns named after a parameter (``psi_s=<s>``),
``required`` the columns every reader may read, ``format`` csv or parquet — with the value
kinds every record shares (``records.defs.yaml``). A table that prints the rows of a record
(``bounds.csv``, the claims CSVs) says ``rows_of: {record, def, leave_out}`` and takes its
columns from that record's schema: they are written down once. The docs' record reference
renders these schemas beside the records' (:mod:`villani.io.record_docs`).

:func:`write` checks a table before its atomic write, :func:`read` after reading it
(:func:`check`, column by column: a missing or unknown column, or the first value a column's
kind refuses, is one ``ValueError`` line naming the file, the column, the row and what is
allowed — the form of a record's error, :func:`villani.io.records.check`). A CSV is read with
its text columns as text and, where the schema says ``null_words`` (``bounds.csv``'s
``undefined``, ``n/a``), those words as a missing number.

Beyond a schema: :func:`step_log` (a segment's steps once each, in order, finite values).
:func:`after_start` selects the checkpoints of a
measurement table that every correlation over checkpoints uses (the claims ledger's and the
figures'): those after each run's first.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from villani.io import atomic, records

__all__ = ["TABLES", "schema", "columns", "column_kind", "ordered", "check", "read", "write", "step_log",
           "after_start"]

#: The tables with a shipped schema ``villani/schemas/<name>.table.yaml``.
TABLES = ("step_log", "measure_samples", "rays", "surface", "hvp_cost", "bounds", "claims")


@functools.cache
def schema(name: str) -> dict:
    """The row schema of table ``name`` (:data:`TABLES`), a ``rows_of`` resolved into the columns
    of its record's row."""
    if name not in TABLES:
        raise ValueError(f"no table schema {name!r} (expected one of {', '.join(TABLES)})")
    doc = records.load_schema_file(f"{name}.table.yaml")
    view = doc.pop("rows_of", None)
    if view is not None:
        record = records.schema(view["record"])
        row, out = record["$defs"][view["def"]], set(view.get("leave_out", ()))
        doc.update(type="object", additionalProperties=False,
                   properties={k: v for k, v in row["properties"].items() if k not in out},
                   required=[k for k in row.get("required", ()) if k not in out],
                   patternProperties=row.get("patternProperties", {}))
        doc["$defs"] = {**record["$defs"], **doc["$defs"]}
    return doc


def columns(name: str) -> tuple[str, ...]:
    """The named columns of table ``name``, in the order written (parameter-named ones aside)."""
    return tuple(schema(name)["properties"])


def column_kind(name: str, column: str) -> records.ValueKind | None:
    """The :class:`~villani.io.records.ValueKind` of ``column`` in table ``name`` (None: no such column)."""
    return _kind(name, column)


def _column_schema(name: str, column: str) -> Mapping | None:
    doc = schema(name)
    if column in doc["properties"]:
        return doc["properties"][column]
    return next((sub for pattern, sub in doc.get("patternProperties", {}).items() if re.search(pattern, column)), None)


@functools.cache
def _kind(name: str, column: str) -> records.ValueKind | None:
    sub = _column_schema(name, column)
    return None if sub is None else records.value_kind(schema(name), sub)


def ordered(name: str, present: Iterable[str]) -> list[str]:
    """``present`` columns in the table's order: the named ones as the schema lists them, then
    each parameter-named group in its pattern's order (keeping their own order)."""
    present = list(present)
    doc = schema(name)
    out = [c for c in doc["properties"] if c in present]
    for pattern in doc.get("patternProperties", {}):
        out += [c for c in present if c not in out and re.search(pattern, c)]
    return out + [c for c in present if c not in out]


# --------------------------------------------------------------------------- checking
def _invalid(path, field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: {json.dumps(value, default=str)[:60]} is invalid (expected {expected})")


def check(name: str, df, path):
    """``df`` when it is a valid table ``name`` (module doc); else a one-line ValueError naming
    ``path``, the column, the row and what the schema allows."""
    doc = schema(name)
    for col in doc.get("required", ()):
        if col not in df.columns:
            raise ValueError(f"{path}: column {col!r} missing (expected the columns of villani/schemas/"
                             f"{name}.table.yaml: {', '.join(doc['required'])}; found {', '.join(map(str, df.columns))})"
                             [:400])
    for col in df.columns:
        kind = _kind(name, str(col))
        if kind is None:
            if doc.get("additionalProperties", True) is False:
                raise ValueError(f"{path}: column {col!r}: unknown column (expected the columns of "
                                 f"villani/schemas/{name}.table.yaml)")
            continue
        bad = _first_bad(df[col], kind)
        if bad is not None:
            i, value = bad
            raise _invalid(path, f"column {col}, row {i + 1}", value,
                           records._expected(doc, _column_schema(name, str(col))))
    return df


def _cell(v: Any) -> Any:
    """A table cell as the JSON value a row schema speaks of (NaN and pandas' NA: null)."""
    import pandas as pd

    if v is None or (np.ndim(v) == 0 and not isinstance(v, (str, bytes)) and pd.isna(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _first_bad(series, kind: records.ValueKind) -> tuple[int, Any] | None:
    """(row, value) of the first value of ``series`` that ``kind`` refuses, or None."""
    from pandas.api import types

    values = series.to_numpy()
    if kind.kinds & {"integer", "number"} and types.is_numeric_dtype(series) and not types.is_bool_dtype(series):
        v = values.astype(float)
        ok = ~np.isnan(v) if not kind.nullable else np.ones(len(v), dtype=bool)
        if "integer" in kind.kinds and "number" not in kind.kinds:
            ok &= np.isnan(v) | (np.floor(v) == v)
        if kind.minimum is not None:
            ok &= np.isnan(v) | (v >= kind.minimum)
        if kind.maximum is not None:
            ok &= np.isnan(v) | (v <= kind.maximum)
        i = np.flatnonzero(~ok)
        return None if not len(i) else (int(i[0]), _cell(values[i[0]]))
    for i, v in enumerate(values):
        if not _allowed(_cell(v), kind):
            return i, _cell(v)
    return None


def _allowed(v: Any, kind: records.ValueKind) -> bool:
    if v is None:
        return kind.nullable
    if isinstance(v, (bool, np.bool_)):
        return "boolean" in kind.kinds
    if isinstance(v, (int, float)):
        if v in (np.inf, -np.inf) and "number" in kind.kinds:
            return True
        if not (("integer" in kind.kinds and float(v).is_integer()) or "number" in kind.kinds):
            return False
        return (kind.minimum is None or v >= kind.minimum) and (kind.maximum is None or v <= kind.maximum)
    if isinstance(v, str):
        return "text" in kind.kinds and (kind.enum is None or v in kind.enum)
    return False


# --------------------------------------------------------------------------- reading and writing
def read(name: str, path: str | Path, what: str | None = None, *, checked: bool = True):
    """Table ``name`` at ``path``, checked (:func:`check`; ``checked=False``: the caller's rules
    check it, :func:`step_log`); a file that cannot be parsed is one line naming it (``what`` it is)."""
    import pandas as pd

    what = what or f"{name} table"
    path = Path(path)
    try:
        if schema(name)["format"] == "parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, **_csv_options(name, pd.read_csv(path, nrows=0).columns))
    except FileNotFoundError:
        raise
    except Exception as e:  # pandas and pyarrow raise several classes for a damaged file
        kind = "not a readable Parquet file" if schema(name)["format"] == "parquet" else f"{what} is corrupt"
        raise ValueError(f"{path}: {kind} ({' '.join(str(e).split())[:200]})") from None
    return check(name, df, path) if checked else df


_MISSING = ["", "nan", "NaN", "NA", "N/A", "n/a", "null", "None", "<NA>"]  # how a CSV writer prints no number


def _csv_options(name: str, header: Iterable[str]) -> dict:
    """How a CSV of table ``name`` with columns ``header`` is parsed: a text column as text (empty:
    empty text), a missing value of another column — and where the schema says ``null_words``, those
    words in any column that may be null — as null."""
    words = list(schema(name).get("null_words", []))
    dtype, missing = {}, {}
    for col in header:
        kind = _kind(name, str(col))
        text = kind is not None and "text" in kind.kinds
        if text:
            dtype[col] = str
        missing[col] = (words if kind is None or kind.nullable else []) + ([] if text else _MISSING)
    return {"dtype": dtype, "na_values": missing, "keep_default_na": False}


def write(name: str, path: str | Path, df, text: str | None = None) -> Path:
    """Write ``df`` as table ``name`` at ``path`` (atomically) once it is checked (:func:`check`);
    ``text``: the CSV as the writer prints it (``df`` holds its values)."""
    check(name, df, path)
    if schema(name)["format"] == "parquet":
        atomic.write_with(path, lambda tmp: df.to_parquet(tmp, index=False))
    else:
        atomic.write_text(path, df.to_csv(index=False) if text is None else text)
    return Path(path)


# --------------------------------------------------------------------------- beyond a schema
def step_log(df, path, *, start: int, end: int):
    """A training segment's per-step log (start, end] (table ``step_log``): integer ``step`` =
    start+1 … end, once each and in order; every value finite, except ``loss`` on a skipped
    step and ``grad_norm`` (a clipped gradient's norm may be inf). A row written by another
    process, a block of NULs, a lost row: one line naming the row."""
    if "step" in df.columns and df["step"].dtype.kind in "iu":
        steps = df["step"].to_numpy()
        want = np.arange(int(start) + 1, int(end) + 1)
        if len(steps) != len(want) or (steps != want).any():
            i = next((i for i, (a, b) in enumerate(zip(steps, want)) if a != b), min(len(steps), len(want)))
            what = (f"step {steps[i]}, expected step {want[i]}" if i < min(len(steps), len(want)) else
                    f"no row, expected step {want[i]}" if i < len(want) else f"step {steps[i]} after the last step {end}")
            raise ValueError(f"{path}: row {i + 1}: {what} (steps {start + 1}…{end} once each, in order: a damaged "
                             "log, or two processes wrote it)")
    check("step_log", df, path)
    steps, skipped = df["step"].to_numpy(), df["skipped"].to_numpy()
    for col in df.columns:
        if col in ("step", "skipped", "grad_norm"):
            continue
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
