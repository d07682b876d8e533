r"""The interval of each ray's fitted slope (Fig 2), beside the fit of :mod:`villani.measure.rays`.

A ray's slope is the least-squares slope of Ψ_s on ‖θ‖² over its ``rays.fit_points`` largest
radii: :math:`b = \sum_i w_i \Psi_i` with :math:`w_i = (x_i - \bar x)/\sum_j (x_j - \bar x)^2`.
Ψ_s's only stochastic part is the Hutchinson estimate of tr ∇²L at each point, a mean of
``rays.num_probes`` probes whose standard error ``trace_L_stderr`` (rays.csv) is estimated
on num_probes − 1 degrees of freedom; the points use independent estimates. So the slope's
interval is the Welch–Satterthwaite t interval of Σ wᵢΨᵢ
(:func:`villani.stats.combination_interval`), whose coverage is tested at these designs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from villani.stats import Interval, combination_interval

__all__ = ["ray_slope_intervals"]


def ray_slope_intervals(table: pd.DataFrame, fits: pd.DataFrame, *, fit_points: int, num_probes: int,
                        confidence: float) -> dict[int, Interval]:
    """``{ray: Interval of its slope}`` for the rows of ``fits`` (one λ and s) from the points of
    ``table`` (rays.csv) at that λ; a ray without per-point errors gets no interval."""
    out = {}
    for f in fits.itertuples():
        g = table[(table["lam"] == f.lam) & (table["ray"] == f.ray)].sort_values("theta_sq").tail(int(fit_points))
        x = g["theta_sq"].to_numpy(float)
        w = (x - x.mean()) / float(np.sum((x - x.mean()) ** 2))
        se = g["trace_L_stderr"].to_numpy(float)
        if x.size < 2 or not np.all(np.isfinite(se)):
            continue
        out[int(f.ray)] = combination_interval(float(f.slope), w, se, np.full(x.size, max(int(num_probes) - 1, 1)),
                                               confidence)
    return out
