r"""The shape of F on one 2-D slice (Fig 3): isotropy, a unique minimum, radial gradients (numpy).

A slice is the grid table of :mod:`villani.measure.landscape` (columns ``a``, ``b``, ``F``; one
``slice`` at a time: :func:`seed_slices` splits a surface table by centre, seed and slice). F
there is computed exactly; what is random is the slice (its two directions), so the ledger
states each number per slice and gives intervals over slices.

- :func:`quadratic_hessian` — the 2×2 Hessian A of the quadratic
  F ≈ c + g·(a, b) + ½ (a, b) A (a, b)ᵀ fitted to every grid point by least squares;
- :func:`quadratic_isotropy` — μ_min/μ_max of A ("circular contours": 1; a valley: ≪ 1),
  ``None`` when A is not positive definite (a saddle or a ridge is no bowl);
- :func:`local_minima` — grid points lower than each of their (up to 8) neighbours;
- :func:`unique_minimum` — the paper's "a unique global minimum" on the slice: exactly one
  strict local minimum on the grid, not on the grid's edge (a minimum on the edge is the
  grid's, not the function's), and A positive definite;
- :func:`radial_slope` — "strong radial gradients" as a number: the outward derivative of F
  away from the grid minimum m, ∇F(p)·(p − m)/‖p − m‖ (∇F by central differences, nats per
  unit of a), at the grid points at least half the span from m, and of those its 10th
  percentile — the weakest outward gradient but for a tenth of the points. A bowl rises in
  every direction (q₁₀ ≈ μ_min·r), a valley's floor hardly at all (q₁₀ ≈ 0), a saddle or a
  ridge falls somewhere (q₁₀ < 0).

>>> import pandas as pd
>>> ax = np.linspace(-1, 1, 5)
>>> bowl = pd.DataFrame([(a, b, a * a + b * b) for a in ax for b in ax], columns=["a", "b", "F"])
>>> round(quadratic_isotropy(bowl), 12), unique_minimum(bowl), round(radial_slope(bowl), 3)   # dF/dr = 2r, r ≥ ½
(1.0, True, 1.0)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["seed_slices", "grid_values", "quadratic_hessian", "quadratic_isotropy", "local_minima", "unique_minimum",
           "radial_slope"]


def seed_slices(df: pd.DataFrame, kind: str) -> dict[int, list[pd.DataFrame]]:
    """Seed → its slices (slice 0 first) around the centres of ``kind`` (``init``, ``final``) of
    a surface table (columns ``center``, ``seed``, ``slice``, ``a``, ``b``, ``F`` …); empty
    when the table has no centre of that kind."""
    rows = df[df["center"] == kind]
    return {int(s): [g.reset_index(drop=True) for _, g in by.groupby("slice", sort=True)]
            for s, by in rows.groupby("seed", sort=True)}


def grid_values(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a axis, b axis, Z) with Z[i, j] = F(a_i, b_j)."""
    piv = df.pivot_table(index="a", columns="b", values="F")
    return piv.index.to_numpy(float), piv.columns.to_numpy(float), piv.to_numpy(float)


def quadratic_hessian(df: pd.DataFrame) -> np.ndarray | None:
    """The fitted quadratic's 2×2 Hessian; ``None`` with fewer than 3 values per axis."""
    a, b, f = (df[c].to_numpy(float) for c in ("a", "b", "F"))
    if len(np.unique(a)) < 3 or len(np.unique(b)) < 3:
        return None
    X = np.column_stack([np.ones_like(a), a, b, 0.5 * a * a, a * b, 0.5 * b * b])
    coef, *_ = np.linalg.lstsq(X, f, rcond=None)
    return np.array([[coef[3], coef[4]], [coef[4], coef[5]]])


def quadratic_isotropy(df: pd.DataFrame) -> float | None:
    """μ_min/μ_max of :func:`quadratic_hessian`; ``None`` unless it is positive definite."""
    h = quadratic_hessian(df)
    if h is None:
        return None
    ev = np.linalg.eigvalsh(h)
    return None if ev[0] <= 0 else float(ev[0] / ev[1])


def local_minima(z: np.ndarray) -> list[tuple[int, int]]:
    """Indices of the grid points strictly below every neighbour (8-neighbourhood, inside the grid)."""
    n, m = z.shape
    pad = np.pad(z, 1, constant_values=np.inf)
    lower = np.ones_like(z, dtype=bool)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            if di or dj:
                lower &= z < pad[1 + di:1 + di + n, 1 + dj:1 + dj + m]
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(lower))]


def unique_minimum(df: pd.DataFrame) -> bool:
    """One strict local minimum on the grid, inside it, and a positive definite fitted Hessian."""
    _, _, z = grid_values(df)
    mins = local_minima(z)
    if len(mins) != 1:
        return False
    i, j = mins[0]
    inside = 0 < i < z.shape[0] - 1 and 0 < j < z.shape[1] - 1
    return bool(inside and quadratic_isotropy(df) is not None)


def radial_slope(df: pd.DataFrame, quantile: float = 0.1) -> float:
    """``quantile`` of ∇F(p)·(p − m)/‖p − m‖ over the grid points p with ‖p − m‖ ≥ half the span,
    m the grid minimum."""
    a, b, z = grid_values(df)
    ga, gb = np.gradient(z, a, b)
    i, j = np.unravel_index(int(np.argmin(z)), z.shape)
    da, db = np.meshgrid(a - a[i], b - b[j], indexing="ij")
    r = np.hypot(da, db)
    keep = r >= 0.25 * (a[-1] - a[0] + b[-1] - b[0]) / 2
    return float(np.quantile((ga * da + gb * db)[keep] / r[keep], quantile))
