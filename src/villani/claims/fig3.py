r"""Fig 3 (Sec. VI-B): the loss landscape on random 2-D slices — valley at λ = 0, bowl at λ = 10⁻³.

Tested where the paper states it: λ = 0 against the paper's λ = 10⁻³, i.e. our λ matched to
it by λ·η·T (:func:`villani.plan.paper_lambda.match`, ``landscape.lambdas`` must hold it),
each slice around that λ's trained run (``landscape.center: final``). The shape numbers of a
slice are exact (:mod:`villani.measure.landscape_shape`); what is random is the slice — a
pair of filter-normalised Gaussian directions — and the landscape stage draws
``landscape.slices`` independent ones per λ. So:

- isotropy μ_min/μ_max of the fitted quadratic's Hessian ("circular contours"; a slice that
  is no bowl counts 0) and its rise from λ = 0: t interval over slices (one value per slice;
  slice k at λ = 0 and at λ > 0 are paired by their index);
- "a unique global minimum": per slice, one strict local minimum on the grid, inside it,
  and a positive definite fitted Hessian — a statement about every slice, so each slice is
  a unit with its exact value and the claim is supported only if every slice has it,
  refuted if any slice lacks it (:func:`villani.claims.verdict.unit_verdict`);
- "strong(er) radial gradients": the weakest outward slope of F away from the slice's
  minimum but for a tenth of the points (the 10th percentile over the grid points at least
  half the span away; nats per unit step along a filter-normalised direction; ≈ 0 on a flat
  valley floor), λ = 10⁻³ minus λ = 0 per slice, t interval over slices.

With one slice there is no interval over slices and the rows stay inconclusive.

The centre matters: the caption draws its slices "around the initialization point θ₀"
(``landscape.center: init``), Sec. VI-B does not say. On the default model at
initialisation λ = 0 is an elongated, flat valley (isotropy 0.45–0.84, outward slope
q₁₀ ≈ 0.01 on three slices) and λ = 0.012 a bowl (0.97–1.00, q₁₀ ≈ 0.42); around the trained
runs both are bowls (λ = 0: 0.89–0.98) — training curves the data term itself.
"""

from __future__ import annotations

import pandas as pd

from villani.claims.context import Context, fmt, from_units, join, none
from villani.claims.registry import Measured, claim
from villani.claims.verdict import Region
from villani.io.results import landscape_surface
from villani.measure.landscape_shape import quadratic_isotropy, radial_slope, unique_minimum
from villani.plan.paper_lambda import LambdaMatch
from villani.stats import exact_value, seed_interval


def _slices(df: pd.DataFrame) -> list[pd.DataFrame]:
    if "slice" not in df:
        return [df]
    return [g for _, g in df.groupby("slice", sort=True)]


def _surfaces(ctx: Context) -> dict[float, list[pd.DataFrame]]:
    """λ → its slices, for every λ of ``landscape.lambdas`` whose surface exists."""
    out = {}
    for lam in ctx.params["landscape"]["lambdas"]:
        try:
            out[float(lam)] = _slices(landscape_surface(ctx.params, float(lam), ctx.root)[0])
        except ValueError:
            pass
    return out


def _setup(ctx: Context, with_zero: bool) -> tuple[dict, LambdaMatch, str, str | None]:
    """(surfaces, the match of the paper's 10⁻³, where, why nothing can be computed or None)."""
    surf, m = _surfaces(ctx), ctx.match("middle")
    lams = ([0.0] if with_zero else []) + ([m.ours] if m.ours is not None else [])
    n = min((len(surf[x]) for x in lams if x in surf), default=0)
    where = ctx.where("landscape slices", lams, extra=f", {n} random 2-D slice(s) each, around the trained run")
    if m.ours is None:
        return surf, m, where, m.text()
    missing = [x for x in lams if x not in surf]
    if missing:
        return surf, m, where, (f"no landscape at λ = {', '.join(f'{x:g}' for x in missing)} (landscape.lambdas = "
                                f"{ctx.params['landscape']['lambdas']}; {m.text()})")
    return surf, m, where, None


def _isotropy(g: pd.DataFrame) -> float:
    return quadratic_isotropy(g) or 0.0


def _per_slice(values: list[float], ctx: Context, what: str) -> tuple:
    iv = seed_interval(values, ctx.confidence, unit="slice")
    return iv, f"{what} per slice: " + ", ".join(fmt(v) for v in values)


@claim("fig3_bowl", "Fig 3, Sec. VI-B", "With λ = 10⁻³ the landscape is a bowl with circular contours",
       "circular contours (isotropy ≈ 1)",
       "μ_min/μ_max of the quadratic fitted to F on a slice (no bowl: 0), our λ matched to 1e-3, t over slices",
       Region.at_least(0.8))
def fig3_bowl(ctx: Context) -> Measured:
    surf, m, where, why = _setup(ctx, with_zero=False)
    if why:
        return none(why, where, match_=m)
    iv, text = _per_slice([_isotropy(g) for g in surf[m.ours]], ctx, "isotropy")
    return Measured(iv, where, text, match=m)


@claim("fig3_valley_at_zero", "Fig 3 caption, Sec. VI-B",
       "Without weight decay (λ = 0) the landscape is a narrow valley with elongated contours",
       "elongated contours at λ = 0 (not a bowl)",
       "μ_min/μ_max of the quadratic fitted to F on a slice (no bowl: 0), λ = 0, t over slices",
       Region.at_most(0.8, strict=True))
def fig3_valley_at_zero(ctx: Context) -> Measured:
    surf, m, where, why = _setup(ctx, with_zero=True)
    if why:
        return none(why, where, match_=m)
    iv, text = _per_slice([_isotropy(g) for g in surf[0.0]], ctx, "isotropy at λ = 0")
    return Measured(iv, where, text, match=m)


@claim("fig3_valley_to_bowl", "Fig 3, Sec. VI-B", "λ = 0 is an elongated valley, λ = 10⁻³ a bowl",
       "isotropy rises from λ = 0 to λ = 10⁻³",
       "per slice: isotropy(our λ matched to 1e-3) − isotropy(λ = 0) (no bowl: 0), t over slices",
       Region.direction(+1))
def fig3_valley_to_bowl(ctx: Context) -> Measured:
    surf, m, where, why = _setup(ctx, with_zero=True)
    if why:
        return none(why, where, match_=m)
    pairs = list(zip(surf[0.0], surf[m.ours]))
    iv, text = _per_slice([_isotropy(b) - _isotropy(a) for a, b in pairs], ctx, "rise")
    at0 = ", ".join(fmt(_isotropy(a)) for a, _ in pairs)
    return Measured(iv, where, join(text, f"isotropy at λ = 0: {at0}"), match=m)


@claim("fig3_unique_minimum", "Fig 3 caption", "With weight decay the landscape has a unique global minimum",
       "a unique global minimum",
       "per slice: 1 if F on the grid has exactly one strict local minimum, inside the grid, and the fitted "
       "quadratic's Hessian is positive definite, else 0; our λ matched to 1e-3; every slice",
       Region(1.0, 1.0, text="= 1 on every slice"))
def fig3_unique_minimum(ctx: Context) -> Measured:
    surf, m, where, why = _setup(ctx, with_zero=False)
    if why:
        return none(why, where, match_=m)
    units = [(f"slice {k}", exact_value(float(unique_minimum(g)), "exact on this slice"))
             for k, g in enumerate(surf[m.ours])]
    at0 = [unique_minimum(g) for g in surf.get(0.0, [])]
    note = f"λ = 0 (the paper: multiple equivalent minima): unique on {sum(at0)} of {len(at0)} slices" if at0 else ""
    return from_units(units, where, note, match=m)


@claim("fig3_radial_gradients", "Fig 3 caption, Sec. VI-B",
       "Weight decay gives stronger radial gradients than λ = 0 (no flat regions with weak gradients)",
       "stronger radial gradients at λ = 10⁻³",
       "per slice: 10th percentile of the outward slope of F at the grid points ≥ half the span from its minimum "
       "(nats per unit step), our λ matched to 1e-3 − λ = 0, t over slices", Region.direction(+1))
def fig3_radial_gradients(ctx: Context) -> Measured:
    surf, m, where, why = _setup(ctx, with_zero=True)
    if why:
        return none(why, where, match_=m)
    lo, hi = ([radial_slope(g) for g in surf[x]] for x in (0.0, m.ours))
    iv, text = _per_slice([b - a for a, b in zip(lo, hi)], ctx, "difference")
    return Measured(iv, where, join(text, f"slope at λ = 0: {', '.join(fmt(v) for v in lo)}; at λ = {m.ours:g}: "
                                          f"{', '.join(fmt(v) for v in hi)}"), match=m)
