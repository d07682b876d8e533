"""A measure JSON beyond its schema (``villani/schemas/measure.schema.yaml``): the rules that
tie its keys to each other and to its path, and its flat row in the measurement table.

**Rules.** A schema says what each key holds; :func:`villani.io.results.read_measure` applies
these after :func:`villani.io.records.check`:

- :func:`check_identity` — its ``lam``, ``seed``, ``step`` and ``variant`` are those of the
  run and checkpoint whose path it was read from;
- :func:`check_precision_audit` — ``precision`` is the audit's ``used``, and ``passed`` is
  what the audit's numbers say: every ratio r of ``error_over_stderr`` (the worst product error
  over the standard error it is compared with) has r ≤ ``fraction``; a failed audit never
  stands behind numbers published below "highest".

Each failure is one line ``"<file>: <key>: <value> is invalid (expected <what>)"``.

**The flat row** (:func:`measurement_row`, one per checkpoint of
:func:`villani.io.results.measurements`) is generated from the schema: its columns are the
keys the schema *requires* — what the readers read —, flattened one level, in the schema's
order (:data:`ROW_COLUMNS` the fixed ones, with their kinds):

- a scalar key (number, integer, text, boolean) is a column of its name; :data:`IDENTITY`
  first (``dataset, variant, lam, seed, step``), then ``path`` (the file);
- an interval ``[lo, hi]`` is two columns ``<key>_lo``, ``<key>_hi``;
- an object with declared keys (``trace_L``, ``lanczos``, ``slq``, ``precision_audit``,
  ``cost``) gives ``<key>_<sub>`` for each of its required scalars and intervals (null when
  the object is: a checkpoint without a spectrum has no ``lanczos``);
- the maps named in :data:`MAP_COLUMNS` give one column per entry: ``psi_s=<s>``
  (:func:`villani.diagnostics.psi.psi_column`) with ``psi_s=<s>_ci95_lo/hi``, ``block:<group>``;
- the lists ``top_eigenvalues`` and ``top_residuals`` (largest first) are list columns;
- an object without declared keys (``train_params``) is no column.

:data:`MEASURE_SCALARS` (numeric), :data:`MEASURE_LABELS` (text) and :data:`TRACE_FIELDS` (the
numeric keys of ``trace_L``) are the same lists, as the figures and claims name them.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from villani.io import records
from villani.diagnostics.psi import psi_column

__all__ = ["IDENTITY", "ROW_COLUMNS", "MAP_COLUMNS", "MEASURE_SCALARS", "MEASURE_LABELS", "TRACE_FIELDS",
           "measurement_row", "check_identity", "check_precision_audit"]

IDENTITY = ("dataset", "variant", "lam", "seed", "step")
_LISTS = ("top_eigenvalues", "top_residuals")


def _psi(s: str) -> str:
    return psi_column(float(s))


#: The maps of a measure JSON flattened to one column per entry: key → (column of an entry, is an interval).
MAP_COLUMNS = {"psi_s": (_psi, False), "psi_s_ci95": (lambda s: f"{_psi(s)}_ci95", True),
               "block_traces": (lambda g: f"block:{g}", False)}


def _is_interval(doc: Mapping, sub: Mapping) -> bool:
    kind = records.value_kind(doc, sub)
    s = records._resolve(doc, sub, through_titles=True)
    s = next((records._resolve(doc, a, through_titles=True) for a in s.get("anyOf", ()) if "$ref" in a), s)
    return kind.kinds == {"array"} and s.get("minItems") == s.get("maxItems") == 2


def _flat(doc: Mapping, keys, props: Mapping, prefix: str = "") -> list[tuple[str, str, tuple, str]]:
    """(column, kind, path, how) of each of ``keys`` (how: value, interval, map, list, object)."""
    out = []
    for key in keys:
        sub, col = props[key], f"{prefix}{key}"
        kind = records.value_kind(doc, sub)
        if kind.scalar:
            out.append((col, "number" if kind.numeric else "text" if kind.kinds == {"text"} else "boolean", (key,),
                        "value"))
        elif _is_interval(doc, sub):
            out += [(f"{col}_lo", "number", (key, 0), "interval"), (f"{col}_hi", "number", (key, 1), "interval")]
        elif not prefix and key in MAP_COLUMNS:
            out.append((col, "map", (key,), "map"))
        elif not prefix and key in _LISTS:
            out.append((col, "list", (key,), "list"))
        elif not prefix and kind.kinds == {"object"}:
            target = records._resolve(doc, sub, through_titles=True)
            inner = _flat(doc, target.get("required", ()), target.get("properties", {}), f"{key}_")
            out += [(c, k, (key, *p), how) for c, k, p, how in inner if how in ("value", "interval")]
    return out


def _plan() -> list[tuple[str, str, tuple, str]]:
    doc = records.schema("measure")
    required = set(doc["required"])
    return _flat(doc, [k for k in doc["properties"] if k in required], doc["properties"])


_PLAN = _plan()

#: The fixed columns of a measurement row and their kinds (number, text, boolean, list).
ROW_COLUMNS = {col: kind for col, kind, _, how in _PLAN if how != "map"}
MEASURE_SCALARS = tuple(c for c, k, p, how in _PLAN if how == "value" and len(p) == 1 and k == "number"
                        and c not in IDENTITY)
MEASURE_LABELS = tuple(c for c, k, p, how in _PLAN if how == "value" and len(p) == 1 and k == "text"
                       and c not in IDENTITY)
TRACE_FIELDS = tuple(p[1] for c, k, p, how in _PLAN if how == "value" and p[0] == "trace_L" and k == "number")


def measurement_row(m: Mapping, path) -> dict:
    """The flat row of one measure JSON (module doc), read as :func:`villani.io.results.read_measure` checked it."""
    row: dict[str, Any] = {}
    for col, _, p, how in _PLAN:
        value = m[p[0]]
        if how == "map":
            name, interval = MAP_COLUMNS[p[0]]
            for key, v in (value or {}).items():
                row.update({f"{name(key)}_lo": (v or [None, None])[0], f"{name(key)}_hi": (v or [None, None])[1]}
                           if interval else {name(key): v})
            continue
        for part in p[1:]:
            value = None if value is None else value[part]
        row[col] = list(value or []) if how == "list" else value
        if col == "step":
            row["path"] = str(path)
    return row


def _invalid(path, field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: {json.dumps(value, default=str)[:60]} is invalid (expected {expected})")


def check_identity(rec: Mapping, path, *, lam: float | None = None, seed: int | None = None,
                   step: int | None = None, variant: str | None = None) -> None:
    """The record's λ, seed, step and variant are those given (None: not checked)."""
    for key, want in (("lam", lam), ("seed", seed), ("step", step)):
        if want is not None and float(rec[key]) != float(want):
            raise _invalid(path, key, rec[key], f"{want}, the {key} of the path it was read from")
    if variant is not None and rec["variant"] != variant:
        raise _invalid(path, "variant", rec["variant"], f"{variant!r}, the variant of its path")


def check_precision_audit(rec: Mapping, path) -> None:
    """The audit rules of the module doc (the schema has checked each value's kind)."""
    a = rec["precision_audit"]
    if rec["precision"] != a["used"]:
        raise _invalid(path, "precision", rec["precision"], f"{a['used']!r}, precision_audit.used")
    fraction = float(a["fraction"])
    passed = all(v is not None and float(v) <= fraction for v in a["error_over_stderr"].values())
    if a["passed"] is not passed:
        raise _invalid(path, "precision_audit.passed", a["passed"],
                       f"{str(passed).lower()}: error_over_stderr against fraction {fraction}")
    if a["used"] != "highest" and not passed:
        raise _invalid(path, "precision_audit.used", a["used"], "highest: a failed audit recomputes the trace there")
