r"""Fig 3 (Sec. VI-B): the loss landscape on a random 2-D slice — valley at λ = 0, bowl at λ > 0.

The statistic is the isotropy μ_min/μ_max of the 2×2 Hessian of the quadratic fitted to F on
the slice's grid (least squares). F on the grid is computed exactly, so the only random part
is the choice of the slice — and the landscape stage draws one slice per λ. One draw gives
no interval over slices: the rows report the isotropy and stay inconclusive; more slices
(one landscape per pair of directions) would give a t interval over slices.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from villani.claims.context import Context, fmt, none
from villani.claims.registry import Measured, claim
from villani.claims.verdict import Region
from villani.io.results import landscape_surface
from villani.stats import Interval

ONE_SLICE = ("one random slice per λ: the isotropy is exact on that slice, but a claim about the landscape "
             "needs an interval over slices (a second pair of random directions is another slice)")


def quadratic_isotropy(df: pd.DataFrame) -> float | None:
    """μ_min/μ_max of the Hessian of F ≈ c + g·(a, b) + ½(a, b)A(a, b)ᵀ fitted to the grid points;
    ``None`` when the fitted surface is not a bowl (a saddle or a valley: μ_max ≤ 0)."""
    a, b, f = (df[c].to_numpy(float) for c in ("a", "b", "F"))
    if len(np.unique(a)) < 3 or len(np.unique(b)) < 3:
        return None
    X = np.column_stack([np.ones_like(a), a, b, 0.5 * a * a, a * b, 0.5 * b * b])
    coef, *_ = np.linalg.lstsq(X, f, rcond=None)
    ev = np.linalg.eigvalsh(np.array([[coef[3], coef[4]], [coef[4], coef[5]]]))
    return None if ev[1] <= 0 else float(ev[0] / ev[1])


def _surfaces(ctx: Context) -> dict[float, pd.DataFrame]:
    out = {}
    for lam in ctx.params["landscape"]["lambdas"]:
        try:
            out[float(lam)] = landscape_surface(ctx.params, float(lam), ctx.root)[0]
        except ValueError:
            pass
    return out


def _one_slice(value: float | None, confidence: float) -> Interval:
    return Interval(value, None, None, confidence, 1, 1, None, "one slice: " + ONE_SLICE)


@claim("fig3_bowl", "Fig 3, Sec. VI-B", "With λ > 0 the landscape is a bowl with circular contours",
       "circular contours (isotropy ≈ 1)", "μ_min/μ_max of the quadratic fitted to F on the slice, largest λ",
       Region.at_least(0.8))
def fig3_bowl(ctx: Context) -> Measured:
    surf = _surfaces(ctx)
    pos = sorted(x for x in surf if x > 0)
    where = ctx.where("landscape slice", pos[-1:], extra=", one random 2-D slice")
    if not pos:
        return none("no landscape at λ > 0", where)
    q = quadratic_isotropy(surf[pos[-1]])
    return Measured(_one_slice(q, ctx.confidence), where, f"isotropy {fmt(q)} ({'a bowl' if q else 'not a bowl'})")


@claim("fig3_valley_to_bowl", "Fig 3, Sec. VI-B", "λ = 0 is an elongated valley, λ > 0 a bowl",
       "isotropy rises from λ = 0 to λ > 0", "isotropy(largest λ) − isotropy(λ = 0) (not a bowl: 0)",
       Region.direction(+1))
def fig3_valley_to_bowl(ctx: Context) -> Measured:
    surf = _surfaces(ctx)
    pos = sorted(x for x in surf if x > 0)
    where = ctx.where("landscape slice", ([0.0] if 0.0 in surf else []) + pos[-1:], extra=", one random slice each")
    if 0.0 not in surf or not pos:
        return none("landscape.lambdas needs λ = 0 and a λ > 0", where)
    q0, q1 = quadratic_isotropy(surf[0.0]), quadratic_isotropy(surf[pos[-1]])
    diff = (q1 or 0.0) - (q0 or 0.0)
    return Measured(_one_slice(diff, ctx.confidence), where, f"isotropy at λ = 0: {fmt(q0)}, at λ = {pos[-1]:g}: "
                    f"{fmt(q1)} (not a bowl counts as 0)")
