r"""The interval of each ray's fitted slope (Fig 2), beside the fit of :mod:`villani.measure.rays`.

A ray's slope is the least-squares slope of Ψ_s on ‖θ‖² over its ``rays.fit_points`` largest
radii: :math:`b = \sum_i w_i \Psi_i` with :math:`w_i = (x_i - \bar x)/\sum_j (x_j - \bar x)^2`.
Ψ_s's only stochastic part is the Hutchinson estimate of tr ∇²L at each point, a mean of
``rays.num_probes`` probe samples (rays.csv ``trace_L_probe<j>``). The probes are the **same
at every radius** (one seed, ``rays.seed``), so one probe's errors at different radii are
correlated, and the slope's standard error is not √Σ wᵢ² seᵢ². Probe j instead gives a slope
of its own,

.. math:: b_j = \sum_i w_i \big(\Psi_i - (t_{ij} - \bar t_i)\big),\qquad \bar b = b,

i.i.d. over j whatever the correlation across radii, and the interval is the t interval of
the b_j over the M probes (df = M − 1; :func:`villani.statistics.intervals.probe_combination_interval`,
its coverage at this design in ``tests/claims/test_coverage.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from villani.diagnostics.psi import psi_column
from villani.statistics.intervals import Interval, probe_combination_interval

__all__ = ["probe_column", "group_grad_column", "GROUP_GRAD_PREFIX", "probe_samples", "slope_weights",
           "trace_slope_stderr", "ray_slope_intervals"]


def probe_column(j: int) -> str:
    """rays.csv's column of probe j's trace sample at each point."""
    return f"trace_L_probe{int(j)}"


#: rays.csv's columns of ‖∇_g L‖², one per parameter group g: ``grad_L_sq:<group>``.
GROUP_GRAD_PREFIX = "grad_L_sq:"


def group_grad_column(group: str) -> str:
    """rays.csv's column of ‖∇_g L‖² for the parameter group ``group``."""
    return GROUP_GRAD_PREFIX + group


def probe_samples(points: pd.DataFrame) -> np.ndarray | None:
    """(probes, points) trace samples of ``points`` (rays.csv rows of one ray and λ); ``None``
    when rays.csv lacks them."""
    cols = sorted((c for c in points.columns if c.startswith("trace_L_probe")), key=lambda c: int(c[13:]))
    if not cols:
        return None
    return points[cols].to_numpy(float).T


def slope_weights(x: np.ndarray) -> np.ndarray:
    """wᵢ = (xᵢ − x̄)/Σ(x − x̄)²: the least-squares slope is Σ wᵢ yᵢ."""
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / float(np.sum((x - x.mean()) ** 2))


def trace_slope_stderr(points: pd.DataFrame) -> float:
    """The standard error the trace estimate gives the slope over ``points``: the SD of the
    per-probe slopes Σ wᵢ t_ij over √M (the same probes at every point); NaN without samples."""
    s = probe_samples(points)
    if s is None or s.shape[0] < 2:
        return float("nan")
    z = s @ slope_weights(points["theta_sq"].to_numpy(float))
    return float(np.std(z, ddof=1) / np.sqrt(z.size))


def ray_slope_intervals(table: pd.DataFrame, fits: pd.DataFrame, *, fit_points: int, num_probes: int,
                        confidence: float) -> dict[int, Interval]:
    """``{ray: Interval of its slope}`` for the rows of ``fits`` (one λ and s) from the points of
    ``table`` (rays.csv) at that λ; a ray without per-probe samples (or with fewer than
    ``num_probes``) gets no interval."""
    out = {}
    for f in fits.itertuples():
        g = table[(table["lam"] == f.lam) & (table["ray"] == f.ray)].sort_values("theta_sq").tail(int(fit_points))
        samples = probe_samples(g)
        if len(g) < 2 or samples is None or samples.shape[0] < int(num_probes) or not np.all(np.isfinite(samples)):
            continue
        psi = g[psi_column(float(getattr(f, "s", 1.0)))].to_numpy(float)
        per_probe = psi - (samples - g["trace_L"].to_numpy(float))
        out[int(f.ray)] = probe_combination_interval(per_probe, slope_weights(g["theta_sq"].to_numpy(float)),
                                                     confidence)
    return out
