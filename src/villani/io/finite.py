"""Refuse non-finite numbers before anything is written."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = ["check_finite"]


def check_finite(obj: Any, where: str, key: str = "") -> None:
    """Raise ``ValueError('<where>: non-finite <key> (<value>)…')`` for any NaN/inf in ``obj``."""
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            check_finite(v, where, f"{key}.{k}" if key else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            check_finite(v, where, f"{key}[{i}]")
    elif isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(obj))
        if bad.size:
            raise ValueError(f"{where}: non-finite {key or 'value'} ({obj.ravel()[bad[0]]} at index {bad[0]}, "
                             f"{bad.size} of {obj.size}); nothing written")
    elif isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"{where}: non-finite {key or 'value'} ({obj}); nothing written")
