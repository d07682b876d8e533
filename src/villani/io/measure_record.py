"""What a measure JSON must satisfy beyond its schema (``villani/schemas/measure.schema.yaml``).

A schema says what each key holds; these rules tie keys to each other and to where the
record was read from, so :func:`villani.io.results.read_measure` applies them after
:func:`villani.io.records.check`:

- :func:`check_identity` — its ``lam``, ``seed``, ``step`` (and ``variant``) are those of the
  run and checkpoint whose path it was read from;
- :func:`check_precision_audit` — the job's precision audit
  (:mod:`villani.measure.precision_audit`) is present wherever the published trace products
  were not fp32 "highest", ``precision`` is the audit's ``used``, and ``passed`` is what the
  audit's numbers say: every ratio r of ``error_over_stderr`` (the worst product error over
  the standard error it is compared with) has r ≤ ``fraction``; a failed audit never stands
  behind numbers published below "highest".

Each failure is one line ``"<file>: <key>: <value> is invalid (expected <what>)"``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = ["check_identity", "check_precision_audit"]

# what a record without an audit may have used (villani.measure/1 and /2 wrote "fp32")
_FULL_PRECISION = (None, "fp32", "highest")


def _invalid(path, field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: {json.dumps(value, default=str)[:60]} is invalid (expected {expected})")


def check_identity(rec: Mapping, path, *, lam: float | None = None, seed: int | None = None,
                   step: int | None = None, variant: str | None = None) -> None:
    """The record's λ, seed, step and variant are those given (None: not checked)."""
    for key, want in (("lam", lam), ("seed", seed), ("step", step)):
        if want is not None and float(rec[key]) != float(want):
            raise _invalid(path, key, rec[key], f"{want}, the {key} of the path it was read from")
    if variant is not None and "variant" in rec and rec["variant"] != variant:
        raise _invalid(path, "variant", rec["variant"], f"{variant!r}, the variant of its path")


def check_precision_audit(rec: Mapping, path) -> None:
    """The audit rules of the module doc (the schema has checked each value's kind)."""
    a = rec.get("precision_audit")
    if a is None:
        if rec.get("precision") not in _FULL_PRECISION:
            raise ValueError(f"{path}: precision_audit: missing (expected the job's precision audit wherever the "
                             "products were not fp32 highest; re-run villani measure)")
        return
    if rec.get("precision") != a["used"]:
        raise _invalid(path, "precision", rec.get("precision"), f"{a['used']!r}, precision_audit.used")
    fraction = float(a["fraction"])
    passed = all(v is not None and float(v) <= fraction for v in a["error_over_stderr"].values())
    if a["passed"] is not passed:
        raise _invalid(path, "precision_audit.passed", a["passed"],
                       f"{str(passed).lower()}: error_over_stderr against fraction {fraction}")
    if a["used"] != "highest" and not passed:
        raise _invalid(path, "precision_audit.used", a["used"], "highest: a failed audit recomputes the trace there")
