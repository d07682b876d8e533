"""How the bounds table prints: ``None`` as ``undefined`` (λ = 0) or ``n/a`` (a hypothesis
fails), booleans as ``true``/``false``, CSV cells quoted where needed."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from villani.bounds.theory import UNDEFINED

NOT_APPLICABLE = "n/a"


def format_value(value: Any, fmt: str = "{:.6g}", none: str = UNDEFINED) -> str:
    """How a table prints a value: ``None`` (a number not given) is ``none`` (``"undefined"``).

    Booleans are ``true``/``false``, floats use ``fmt`` (``inf`` stays ``inf``); NaN is
    refused, since no function here produces one — it would be a bug upstream.
    """
    if value is None:
        return none
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            raise ValueError("NaN in a bounds table: undefined bounds must be None")
        return fmt.format(float(value))
    return str(value)


def format_row(row: Mapping[str, Any], fmt: str = "{:.6g}") -> dict[str, str]:
    """:func:`format_value` applied to every value of a row: ``None`` reads ``n/a`` (hypotheses
    fail) in a bounds row with ``status`` ok and ``undefined`` otherwise (λ = 0, other tables)."""
    none = NOT_APPLICABLE if row.get("status") == "ok" else UNDEFINED
    return {k: format_value(v, fmt, none) for k, v in row.items()}


def csv_cell(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text
