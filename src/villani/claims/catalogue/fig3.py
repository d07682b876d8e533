r"""Fig 3 (Sec. VI-B): the loss landscape on random 2-D slices — valley at λ = 0, bowl at λ = 10⁻³.

Tested where the paper states it: the caption draws its slices "around the initialization
point θ₀" (``landscape.centers: init`` — every seed's step-0 checkpoint, the θ₀ its run started
from), λ = 0 against the paper's λ = 10⁻³, i.e. our λ matched to it by λ·η·T
(:func:`villani.plan.paper_lambda.match`; ``landscape.lambdas`` must hold it), so the penalty
is the one the runs trained with. The shape numbers of a slice are exact
(:mod:`villani.measure.landscape_shape`); what is random is the slice — a pair of
filter-normalised Gaussian directions — and the landscape stage draws ``landscape.slices`` of
them around each seed's θ₀. The slices are the units:

- a mean over slices (isotropy μ_min/μ_max of the fitted quadratic's Hessian, "circular
  contours", a slice that is no bowl counting 0): the mean over seeds of each seed's slice
  mean, Welch–Satterthwaite over the slices stratified by seed
  (:func:`villani.statistics.intervals.stratified_interval`) — its ``units`` are seeds, so the power plan's
  seeds_to_decide counts seeds at ``landscape.slices`` slices each;
- a fraction of slices (a unique interior minimum; a valley at λ = 0 *and* a bowl at 10⁻³ on the
  same slice): Clopper–Pearson over every seed's slices (:func:`villani.statistics.intervals.proportion_interval`,
  conservative for independent slices whose rate differs by seed), claimed for most random
  slices (> 0.5): the paper draws one random slice as the typical one.

**What is arithmetic.** A run's initialisation depends on its seed alone, so around θ₀ the λ
surfaces of a seed share θ₀ and the directions (the record's sha256 are compared): F_λ = L +
P_λ with P_λ = (λ/2)‖θ₀ + aδ₁ + bδ₂‖², whose Hessian on the slice is λG, G = Gram(δ₁, δ₂) ≈
‖δ‖²I for filter-normalised directions. Then the isotropy of H_L + λG exceeds that of H_L
((μ₁ + c)/(μ₂ + c) > μ₁/μ₂ for μ₁ < μ₂, c > 0), and along a unit direction u of the slice the
penalty's outward slope from its minimum is λ·r·uᵀGu > 0: that λ = 10⁻³ is *more* isotropic
and has *stronger* radial gradients than λ = 0 holds by construction, whatever L does
(``fig3_radial_gradients_penalty``, arithmetic). What is measured is L: whether λ = 0 is a
valley with several minima and flat regions (the data term's weakest outward slope against
the penalty's), and whether λG is large enough against H_L to make a bowl with one minimum.

**The trained θ** (``landscape.centers: final``): around each seed's last checkpoint training
has already curved L; these rows are our findings, not the paper's claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import stats as _sps

from villani.claims.catalogue.context import Context, Where, arithmetic, fmt, join, left_out_note, none
from villani.claims.catalogue.registry import ARITHMETIC, FINDINGS, Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.curvature import regularised_loss
from villani.io.results import landscape_surface
from villani.measure.landscape_shape import (quadratic_hessian, quadratic_isotropy, radial_slope, seed_slices,
                                             unique_minimum)
from villani.plan.paper_lambda import PAPER_LAMBDAS, LambdaMatch
from villani.statistics.intervals import Interval, proportion_interval, stratified_interval

#: Isotropy below which a slice is a valley, at or above which a bowl (the claims' regions).
BOWL = 0.8
#: A property of "the" landscape, shown on one random slice: claimed for most slices.
MOST = Region.at_least(0.5, strict=True)


@dataclass(frozen=True)
class Slices:
    """The slices of one λ around one kind of centre: seed → its slices (slice 0 first), and
    seed → (the sha256 of its θ₀, the seed of its directions)."""

    lam: float
    by_seed: dict[int, list[pd.DataFrame]]
    centre: dict[int, tuple[str, int]]

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.by_seed.values())

    def per_slice(self, stat: Callable[[pd.DataFrame], Any]) -> dict[int, list]:
        return {s: [stat(g) for g in gs] for s, gs in self.by_seed.items()}


def _read(ctx: Context, lam: float, kind: str, seeds: set[int] | None) -> Slices | None:
    """The λ surface's slices around the centres of ``kind`` (of ``seeds``; None: every seed)."""
    try:
        table, meta = landscape_surface(ctx.params, lam, ctx.root)
    except ValueError:
        return None
    by = {s: v for s, v in seed_slices(table, kind).items() if seeds is None or s in seeds}
    centre = {int(c["seed"]): (c["weights_sha256"], int(c["direction_seed"])) for c in meta["centres"]
              if c["kind"] == kind}
    return Slices(lam, by, centre) if by else None


def _isotropy(g: pd.DataFrame) -> float:
    return quadratic_isotropy(g) or 0.0


@dataclass(frozen=True)
class Setup:
    """What a Fig 3 row reads: λ → its slices, the paper-λ match, ``measured_on``, why nothing can be
    computed (or ``None``), the runs left out (trained centres of runs that did not learn)."""

    surf: dict[float, Slices]
    m: LambdaMatch
    where: str
    why: str | None
    excluded: tuple[str, ...] = ()


def _learned_seeds(ctx: Context, lams) -> tuple[set[int], tuple[str, ...]]:
    """The seeds whose AdamW runs at every λ of ``lams`` beat the unigram model, and the runs left out."""
    rows, excluded = ctx.rows("adamw", lams)
    seeds = set(ctx.params.train.seeds)
    for lam in lams:
        seeds &= set(int(s) for s in rows[rows["lam"] == float(lam)]["seed"])
    return seeds, excluded


def _setup(ctx: Context, lams: list[float | None], kind: str = "init") -> Setup:
    """The slices of ``lams`` (None: the paper's λ has no match) around the centres of ``kind``."""
    m = ctx.match("middle")
    want = [x for x in lams if x is not None]
    computed = kind in ctx.params["landscape"]["centers"]
    seeds, excluded = _learned_seeds(ctx, want) if kind == "final" and computed else (None, ())
    surf = {x: s for x in want if (s := _read(ctx, x, kind, seeds)) is not None}
    n = min((s.count for s in surf.values()), default=0)
    at = "θ₀ (each seed's step-0 checkpoint)" if kind == "init" else "the trained θ (each seed's last checkpoint)"
    seed_text = ", ".join(str(s) for s in sorted(set().union(*(s.by_seed for s in surf.values()))) or ["none"])
    where = Where(f"{ctx.dataset}, landscape around {at} of the adamw runs, λ = {', '.join(f'{x:g}' for x in want)}, "
                  f"seeds {seed_text}: {n} random 2-D slices ({ctx.params['landscape']['slices']} per seed)", "adamw")
    if None in lams:
        return Setup(surf, m, where, m.text(), excluded)
    missing = [x for x in want if x not in surf]
    if missing:
        return Setup(surf, m, where, f"no landscape around {at} at λ = {', '.join(f'{x:g}' for x in missing)} "
                                     f"(landscape.lambdas = {ctx.params['landscape']['lambdas']}, landscape.centers = "
                                     f"{ctx.params['landscape']['centers']}; {m.text()})", excluded)
    return Setup(surf, m, where, None, excluded)


def _seed_effect(values: dict[int, list[float]]) -> str:
    """The one-way ANOVA of the slices by seed: does θ₀ matter beyond the slice?"""
    groups = [np.asarray(v, float) for v in values.values() if len(v) > 1]
    if len(groups) < 2 or all(np.ptp(g) == 0 for g in groups):
        return ""
    p = float(_sps.f_oneway(*groups).pvalue)
    return f"seed effect (one-way ANOVA over slices) p = {p:.2g}" if np.isfinite(p) else ""


def _mean_over_slices(values: dict[int, list[float]], ctx: Context, what: str) -> tuple[Interval, str]:
    iv = stratified_interval(values, ctx.confidence)
    per = ", ".join(f"{s}: {np.mean(v):.3g}" for s, v in values.items())
    flat = [v for vs in values.values() for v in vs]
    text = f"{what}: per seed (mean of its slices) {per}; slices {fmt(min(flat))}–{fmt(max(flat))}"
    return iv, join(text, _seed_effect(values))


def _fraction(flags: dict[int, list[bool]], ctx: Context, what: str) -> tuple[Interval, str]:
    """Clopper–Pearson over every seed's slices; the note gives the count per seed."""
    k, n = sum(sum(map(bool, v)) for v in flags.values()), sum(len(v) for v in flags.values())
    iv = proportion_interval(k, n, ctx.confidence)
    per = ", ".join(f"{s}: {sum(map(bool, v))}/{len(v)}" for s, v in flags.items())
    return Interval(iv.estimate, iv.low, iv.high, iv.confidence, iv.n, iv.units, iv.dof,
                    iv.method + f" over {n} slices"), f"{what}: {k}/{n} slices (per seed {per})"


def _shared(a: Slices, b: Slices) -> str:
    """Whether two λ's surfaces share each seed's θ₀ (sha256) and directions (their generator's seed)."""
    other = sorted(s for s in a.centre if a.centre[s] != b.centre.get(s))
    if not other:
        return (f"λ = {a.lam:g} and {b.lam:g} share θ₀ (sha256) and the directions on every seed: "
                f"F_{b.lam:g} − F_{a.lam:g} is the penalty alone")
    return f"θ₀ or the directions differ between λ = {a.lam:g} and {b.lam:g} on seeds {other}"


@claim("fig3_bowl", "Fig 3, Sec. VI-B", "With λ = 10⁻³ the landscape is a bowl with circular contours",
       "circular contours (isotropy ≈ 1)",
       "μ_min/μ_max of the quadratic fitted to F on a slice around θ₀ (no bowl: 0), our λ matched to 1e-3; mean over "
       "seeds of each seed's slice mean, Welch t over slices stratified by seed", Region.at_least(BOWL))
def fig3_bowl(ctx: Context) -> Measured:
    su = _setup(ctx, [ctx.match("middle").ours])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    iv, text = _mean_over_slices(su.surf[su.m.ours].per_slice(_isotropy), ctx, "isotropy")
    return Measured(iv, su.where, join(text, _curvatures(su.surf[su.m.ours], su.m.ours)), match=su.m)


def _curvatures(sl: Slices, lam: float) -> str:
    """The treatment's size: the penalty's Hessian on the slices, λG, against the data term's, H_L."""
    pen = [np.linalg.eigvalsh(quadratic_hessian(_penalty_surface(g, lam))) for gs in sl.by_seed.values() for g in gs]
    data = [np.linalg.eigvalsh(quadratic_hessian(g.assign(F=g["loss"]))) for gs in sl.by_seed.values() for g in gs]
    lo, hi = min(p[0] for p in pen), max(p[1] for p in pen)
    return (f"the treatment: the penalty's Hessian on a slice λG has eigenvalues {fmt(lo)}–{fmt(hi)}, L's "
            f"{fmt(min(d[0] for d in data))}–{fmt(max(d[1] for d in data))}")


@claim("fig3_valley_at_zero", "Fig 3 caption, Sec. VI-B",
       "Without weight decay (λ = 0) the landscape is a narrow valley with elongated contours",
       "elongated contours at λ = 0 (not a bowl)",
       "μ_min/μ_max of the quadratic fitted to L on a slice around θ₀ (no bowl: 0), λ = 0; mean over seeds of each "
       "seed's slice mean, Welch t over slices stratified by seed", Region.at_most(BOWL, strict=True))
def fig3_valley_at_zero(ctx: Context) -> Measured:
    su = _setup(ctx, [0.0])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    iv, text = _mean_over_slices(su.surf[0.0].per_slice(_isotropy), ctx, "isotropy at λ = 0")
    return Measured(iv, su.where, text, match=su.m)


@claim("fig3_valley_to_bowl", "Fig 3, Sec. VI-B", "λ = 0 is an elongated valley, λ = 10⁻³ a bowl",
       "valley at λ = 0, bowl at λ = 10⁻³ (the same slice)",
       f"fraction of slices around θ₀ with isotropy < {BOWL:g} at λ = 0 and ≥ {BOWL:g} at our λ matched to 1e-3 "
       "(paired: the same θ₀ and directions); Clopper–Pearson over slices", MOST)
def fig3_valley_to_bowl(ctx: Context) -> Measured:
    su = _setup(ctx, [0.0, ctx.match("middle").ours])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    lo, hi = su.surf[0.0], su.surf[su.m.ours]
    at0, at1 = lo.per_slice(_isotropy), hi.per_slice(_isotropy)
    flags = {s: [a < BOWL <= b for a, b in zip(at0[s], at1.get(s, []))] for s in at0}
    rise = [b - a for s in at0 for a, b in zip(at0[s], at1.get(s, []))]
    iv, text = _fraction(flags, ctx, "valley → bowl")
    return Measured(iv, su.where, join(text, f"the rise of isotropy itself ({fmt(min(rise))}–{fmt(max(rise))}) is "
                                             "≥ 0 by construction (H_L + λG, G ≈ ‖δ‖²I)", _shared(lo, hi)), match=su.m)


@claim("fig3_unique_minimum", "Fig 3 caption", "With weight decay the landscape has a unique global minimum",
       "a unique global minimum",
       "fraction of slices around θ₀ on which F has exactly one strict local minimum on the grid, inside it, and a "
       "positive definite fitted Hessian; our λ matched to 1e-3; Clopper–Pearson over slices", MOST)
def fig3_unique_minimum(ctx: Context) -> Measured:
    su = _setup(ctx, [0.0, ctx.match("middle").ours])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    iv, text = _fraction(su.surf[su.m.ours].per_slice(unique_minimum), ctx, f"unique at λ = {su.m.ours:g}")
    _, at0 = _fraction(su.surf[0.0].per_slice(unique_minimum), ctx, "at λ = 0 (fig3_multiple_minima_at_zero)")
    return Measured(iv, su.where, join(text, at0), match=su.m)


@claim("fig3_multiple_minima_at_zero", "Fig 3 caption",
       "Without weight decay the landscape has multiple equivalent minima", "no unique minimum at λ = 0",
       "fraction of slices around θ₀ on which L has no unique interior minimum (several strict local minima, one on "
       "the grid's edge, or an indefinite fitted Hessian), λ = 0; Clopper–Pearson over slices", MOST)
def fig3_multiple_minima_at_zero(ctx: Context) -> Measured:
    su = _setup(ctx, [0.0])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    iv, text = _fraction(su.surf[0.0].per_slice(lambda g: not unique_minimum(g)), ctx, "no unique minimum at λ = 0")
    return Measured(iv, su.where, text, match=su.m)


def _penalty_surface(g: pd.DataFrame, lam: float) -> pd.DataFrame:
    """The penalty (λ/2)‖θ‖² on the slice's grid, from its ``theta_sq`` column: F of a zero loss."""
    return g.assign(F=regularised_loss(0.0, g["theta_sq"], lam))


@claim("fig3_radial_gradients", "Fig 3 caption, Sec. VI-B",
       "Without weight decay there are flat regions with weak gradients, which the penalty removes",
       "weak radial gradients of L at λ = 0",
       "per slice around θ₀: 10th percentile of L's outward slope at the grid points ≥ half the span from its minimum "
       "(λ = 0), over the same of the penalty (λ/2)‖θ‖² at our λ matched to 1e-3; mean over seeds of each seed's slice "
       "mean, Welch t over slices stratified by seed", Region.at_most(1.0, strict=True))
def fig3_radial_gradients(ctx: Context) -> Measured:
    su = _setup(ctx, [0.0, ctx.match("middle").ours])
    if su.why:
        return none(su.why, su.where, match_=su.m)
    lam, zero = su.m.ours, su.surf[0.0]
    data = zero.per_slice(radial_slope)
    pen = zero.per_slice(lambda g: radial_slope(_penalty_surface(g, lam)))
    ratio = {s: [d / p for d, p in zip(data[s], pen[s])] for s in data}
    iv, text = _mean_over_slices(ratio, ctx, "L's weakest outward slope / the penalty's")
    flat = [v for vs in data.values() for v in vs]
    pflat = [v for vs in pen.values() for v in vs]
    return Measured(iv, su.where, join(text, f"L's q₁₀ {fmt(min(flat))}–{fmt(max(flat))}, the penalty's "
                                             f"{fmt(min(pflat))}–{fmt(max(pflat))} nats per unit step"), match=su.m)


@claim("fig3_radial_gradients_penalty", "Fig 3 caption, Sec. VI-B",
       "Weight decay gives stronger radial gradients than λ = 0", "stronger radial gradients at λ = 10⁻³",
       "the outward slope the penalty adds on a slice around θ₀, λ·r·μ_min(G)/‖δ‖² at the paper's λ = 10⁻³, r = 1, "
       "G = ‖δ‖²I (filter-normalised directions of equal norm, orthogonal in high dimension; arithmetic)",
       Region.direction(+1), basis=ARITHMETIC)
def fig3_radial_gradients_penalty(ctx: Context) -> Measured:
    lam, r = PAPER_LAMBDAS["middle"], 1.0
    return arithmetic(lam * r, "λ·r·μ_min(G/‖δ‖²) with λ = 10⁻³, r = 1 and G/‖δ‖² = I (two orthogonal directions "
                      "of equal norm)",
                      "true at any scale and for every λ > 0, by construction: around a shared θ₀ the λ > 0 surface is "
                      "the λ = 0 surface plus (λ/2)‖θ₀ + aδ₁ + bδ₂‖², whose outward slope from its minimum is "
                      "λ·r·uᵀGu > 0 whatever L does; what the data contributes is fig3_radial_gradients")


def _around_trained(ctx: Context, measure: Callable[[Slices], tuple[Interval, str]]) -> Measured:
    """A finding at λ = 0 around each seed's last checkpoint (runs that learned): ``measure`` of its slices."""
    su = _setup(ctx, [0.0], kind="final")
    if su.why:
        return none(join(su.why, left_out_note(su.excluded)), su.where, match_=su.m, excluded=su.excluded)
    iv, text = measure(su.surf[0.0])
    return Measured(iv, su.where, join(text, left_out_note(su.excluded)), match=su.m, excluded=su.excluded)


@claim("fig3_trained_bowl_at_zero", "Fig 3, Sec. VI-B (our finding)",
       "Around the trained θ (not θ₀) the λ = 0 landscape is already a bowl: training curves L itself",
       "(the paper: a valley at λ = 0)",
       "μ_min/μ_max of the quadratic fitted to L on a slice around each seed's last checkpoint (no bowl: 0), λ = 0, "
       "runs that learned; mean over seeds of each seed's slice mean, Welch t over slices stratified by seed",
       Region.at_least(BOWL), table=FINDINGS)
def fig3_trained_bowl_at_zero(ctx: Context) -> Measured:
    return _around_trained(ctx, lambda sl: _mean_over_slices(sl.per_slice(_isotropy), ctx,
                                                             "isotropy at λ = 0 around the trained θ"))


@claim("fig3_trained_unique_minimum_at_zero", "Fig 3 caption (our finding)",
       "Around the trained θ the λ = 0 landscape has a unique minimum on most slices", "(the paper: several at λ = 0)",
       "fraction of slices around each seed's last checkpoint on which L has exactly one strict local minimum, inside "
       "the grid, with a positive definite fitted Hessian; λ = 0, runs that learned; Clopper–Pearson over slices",
       MOST, table=FINDINGS)
def fig3_trained_unique_minimum_at_zero(ctx: Context) -> Measured:
    return _around_trained(ctx, lambda sl: _fraction(sl.per_slice(unique_minimum), ctx,
                                                     "unique at λ = 0 around the trained θ"))
