r"""The theory's load-bearing premises, measured before their consequences: eq. 17 and eq. 22.

Lemma 4 (eq. 18–19) assumes constants C₁, C₂ independent of θ with

.. math:: \|\nabla L(\theta)\| \le C_1,\qquad \Delta L(\theta) \le C_2\qquad\text{for every }\theta
          \quad\text{(eq. 17)}

(eq. 18 uses −ΔL ≥ −C₂, the upper bound; Corollary 1's "λ = 0 is not Villani" uses ‖∇L‖ ≤ C₁
and a lower bound on ΔL). Eq. 22, C_LS ≤ sup_θ s/Ψ_s(θ), is a bound only if Ψ_s(θ) > 0 at
every θ. What rests on each: :mod:`villani.claims.reporting.chain`. The constants are the paper's: C₁ ≈ 7.6
(App. A) and the C₂ ≈ 5.7·10⁶ that eq. 55–56 give with it (:func:`villani.claims.catalogue.derivation.paper_c2`)
— both for GPT-Neo-125M; eq. 55–56 at our smaller architecture give smaller ones, so a test
against the paper's is the lenient one.

Along the radial rays of Fig 2 (:mod:`villani.measure.rays`: every coordinate of θ moves; L,
∇L per parameter group and tr ∇²L on the fixed measurement set), each random ray a unit:

- ``eq17_grad_bounded``: ‖∇L‖ ≤ C₁ gives L(ru) ≤ L(0) + C₁r, so L grows at most linearly in
  ‖θ‖ (Sec. II-C says so). Per ray the exponent of L in ‖θ‖ — the log-log slope over the
  ``rays.fit_points`` largest radii — and the t interval over rays; an exponent above 1 is a
  gradient that grows without bound. (‖∇L‖'s own exponent is in the note: L is an average and
  smooth, ‖∇L‖ at saturated softmax is not.)
- ``eq17_grad_c1``: per ray the largest ‖∇L‖ over its points / C₁ (exact on the measurement set);
- ``eq17_laplacian_c2``: per ray the largest ΔL over its points / C₂, its interval the largest
  lower and upper ends of the points' t intervals over the probes (df = probes − 1) at
  confidence 1 − α/(rays·points).

The architecture reason (:func:`gradient_by_kind`): which kinds of parameter group —
embeddings, attention, MLP, LayerNorm gains and biases — carry ‖∇L‖² at the largest radius,
against their share of the parameters, and the exponent of each kind's ‖∇_g L‖.

At every checkpoint (every learned run, every update rule), a fraction of **runs** with a
Clopper–Pearson interval (a run counts when every checkpoint holds; docs/claims.md "The
intervals"): ``eq17_checkpoints`` (‖∇L‖ ≤ C₁ and tr ∇²L ≤ C₂) and, over the runs at λ > 0,
``psi_positive_checkpoints`` (Ψ_s > 0).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special

from villani.claims.catalogue.context import Context, Where, from_units, join, left_out_note, none, run_codes
from villani.claims.catalogue.derivation import appendix_constants, paper_c2
from villani.claims.catalogue.paper import C1, WMAX
from villani.claims.catalogue.registry import Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.io.results import rays_table
from villani.measure.parameter_groups import GROUP_KINDS, group_kind
from villani.measure.ray_slopes import GROUP_GRAD_PREFIX
from villani.statistics.intervals import Interval, exact_value, run_proportion_interval, seed_interval
from villani.statistics.samples import fit_slope

__all__ = ["ray_points", "growth_exponents", "gradient_by_kind", "laplacian_max_interval"]


def ray_points(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (ray, point) of rays.csv: the L-quantities, the same for every λ."""
    return table[table["lam"] == table["lam"].iloc[0]].sort_values(["ray", "theta_sq"]).reset_index(drop=True)


def growth_exponents(points: pd.DataFrame, column: str, fit_points: int, *, root: bool = False) -> dict[int, float]:
    """Per ray: the exponent of ``column`` (its square root with ``root``) in ‖θ‖, the log-log
    slope over the ``fit_points`` largest radii (:func:`villani.statistics.samples.fit_slope`)."""
    out = {}
    for ray, g in points.groupby("ray"):
        y = np.sqrt(g[column].to_numpy(float)) if root else g[column].to_numpy(float)
        out[int(ray)] = fit_slope(np.sqrt(g["theta_sq"].to_numpy(float)), y, space="loglog", largest=fit_points).slope
    return out


def gradient_by_kind(points: pd.DataFrame, sizes: dict[str, int], fit_points: int) -> pd.DataFrame:
    """Per kind of parameter group (:data:`~villani.measure.parameter_groups.GROUP_KINDS`): its
    share of the parameters, its share of ‖∇L‖² at each ray's largest radius (mean over the
    rays) and the exponent of its ‖∇_g L‖ in ‖θ‖ (median over the rays)."""
    cols = [c for c in points.columns if c.startswith(GROUP_GRAD_PREFIX)]
    if not cols:
        raise ValueError(f"rays.csv has no {GROUP_GRAD_PREFIX}<group> columns (rerun `villani rays`)")
    kinds = {c: group_kind(c[len(GROUP_GRAD_PREFIX):]) for c in cols}
    by_kind = pd.DataFrame({k: points[[c for c in cols if kinds[c] == k]].sum(axis=1)
                            for k in GROUP_KINDS if k in kinds.values()})
    by_kind[["ray", "theta_sq"]] = points[["ray", "theta_sq"]]
    last = by_kind.sort_values("theta_sq").groupby("ray").tail(1)
    total = last[[k for k in GROUP_KINDS if k in by_kind]].sum(axis=1)
    d = sum(sizes.values())
    rows = []
    for k in (k for k in GROUP_KINDS if k in by_kind):
        exps = growth_exponents(by_kind, k, fit_points, root=True) if (by_kind[k] > 0).all() else {}
        rows.append({"kind": k, "param_share": sum(n for g, n in sizes.items() if group_kind(g) == k) / d,
                     "grad_share": float((last[k] / total).mean()),
                     "exponent": float(np.median(list(exps.values()))) if exps else float("nan")})
    return pd.DataFrame(rows).sort_values("grad_share", ascending=False).reset_index(drop=True)


def _reason(points: pd.DataFrame, doc: dict, fit_points: int) -> str:
    """The architecture reason in words (empty when rays.csv lacks the group columns)."""
    try:
        kinds = gradient_by_kind(points, doc["gradient_groups"], fit_points)
    except ValueError as e:
        return str(e)
    parts = [f"{r.kind} {100 * r.grad_share:.2g}% of ‖∇L‖² from {100 * r.param_share:.2g}% of θ "
             f"({r.grad_share / r.param_share:.2g}× its share; ‖∇_g L‖ ∝ ‖θ‖^{r.exponent:.2g})"
             for r in kinds.itertuples() if r.param_share > 0]
    return "why (mean over the random rays at their largest radius): " + ", ".join(parts)


def _rays(ctx: Context, what: str) -> tuple[pd.DataFrame, dict, Where] | Measured:
    """(the random rays' points, slopes.json, where) — or the row without a statistic, saying why."""
    r = ctx.params.rays
    where = Where(f"{ctx.dataset}, {r.count} random radial rays (every coordinate of θ moves; {r.points} radii, "
                  f"‖θ‖² from {r.theta_sq_min:.3g} to {r.theta_sq_max:.3g}): {what}")
    try:
        table, doc = rays_table(ctx.params, ctx.root)
    except ValueError as e:
        return none(str(e), where)
    pts = ray_points(table)
    pts = pts[pts["kind"] == "random"].reset_index(drop=True)
    return (pts, doc, where) if len(pts) else none("no random ray (rays.count = 0)", where)


def _on_rays(ctx: Context, what: str, stat) -> Measured:
    """``stat(ctx, points, slopes.json, where)`` on the random rays, or the row without a statistic."""
    got = _rays(ctx, what)
    return got if isinstance(got, Measured) else stat(ctx, *got)


def _exp_text(exps: dict[int, float]) -> str:
    return ", ".join(f"ray {k}: {v:.3g}" for k, v in exps.items())


@claim("eq17_grad_bounded", "eq. 17, Sec. II-C (Lemma 4's premise)", "‖∇L(θ)‖ ≤ C₁ for every θ: L grows at most "
       "linearly with ‖θ‖", "L = O(‖θ‖)", "per random ray: exponent of L in ‖θ‖ (log-log slope over the "
       "rays.fit_points largest radii), t over rays", Region.at_most(1.0))
def eq17_grad_bounded(ctx: Context) -> Measured:
    return _on_rays(ctx, f"L and ‖∇L‖ at the {ctx.params['rays']['fit_points']} largest radii", _loss_growth)


def _loss_growth(ctx: Context, pts: pd.DataFrame, doc: dict, where: Where) -> Measured:
    k = ctx.params.rays.fit_points
    exps = growth_exponents(pts, "loss", k)
    grads = growth_exponents(pts, "grad_L_sq", k, root=True)
    iv = seed_interval(list(exps.values()), ctx.confidence, unit="ray")
    return Measured(iv, where, join(f"exponent of L: {_exp_text(exps)}; of ‖∇L‖: {_exp_text(grads)}",
                                    _reason(pts, doc, k)))


@claim("eq17_grad_c1", "eq. 17, App. A eq. 55", "‖∇L(θ)‖ ≤ C₁ ≈ 7.6 for every θ", "‖∇L‖ ≤ 7.6",
       "per random ray: largest ‖∇L‖ over its points / C₁ = 7.6 (exact on the measurement set)", Region.at_most(1.0))
def eq17_grad_c1(ctx: Context) -> Measured:
    return _on_rays(ctx, "‖∇L‖ at every radius", _grad_over_c1)


def _grad_over_c1(ctx: Context, pts: pd.DataFrame, doc: dict, where: Where) -> Measured:
    units, at = [], []
    for ray, g in pts.groupby("ray"):
        i = int(g["grad_L_sq"].to_numpy().argmax())
        v = math.sqrt(float(g["grad_L_sq"].iloc[i])) / C1
        units.append((f"ray {ray}", exact_value(v, "‖∇L‖ on the measurement set, exact")))
        at.append(f"ray {ray} at ‖θ‖² = {g['theta_sq'].iloc[i]:.3g}")
    reason = _reason(pts, doc, ctx.params.rays.fit_points)
    top = exact_value(max(iv.estimate for _, iv in units), "the largest over the random rays of each ray's largest "
                      "‖∇L‖ / C₁ (exact on the measurement set); the verdict is per ray")
    per_ray = ", ".join(f"{k}: {iv.estimate:.3g}" for k, iv in units)
    return Measured(top, where, join(per_ray, "largest at " + ", ".join(at), reason, _our_constants(ctx, doc)),
                    units=tuple(units))


def _our_constants(ctx: Context, doc: dict) -> str:
    """Eq. 55–56 at our architecture with the paper's W* and the B its C₁ implies."""
    model = doc.get("model") or {}
    layers, width = model.get("num_hidden_layers"), model.get("hidden_size")
    if not layers or not width:
        return ""
    b, _ = appendix_constants()
    c1 = 2 * b * WMAX * (1 + layers * WMAX * math.sqrt(width))
    _, c2 = appendix_constants(c1, WMAX, layers, width, ctx.vocab)
    return (f"eq. 55–56 at our L = {layers}, d_model = {width}, V = {ctx.vocab} (the paper's W* = {WMAX}, B = {b:.3g}) "
            f"give C₁ = {c1:.3g}, C₂ = {c2:.3g}: the paper's C₁ = {C1}, C₂ = {paper_c2():.3g} are the lenient test")


def laplacian_max_interval(g: pd.DataFrame, num_probes: int, confidence: float, scale: float) -> Interval:
    """The largest ΔL over a ray's points (``trace_L``, ``trace_L_stderr``) / ``scale``, with the
    largest lower and upper ends of the points' t intervals (df = probes − 1) at ``confidence``
    each: a simultaneous interval for the largest of the points' traces when the caller's
    ``confidence`` is Bonferroni over the points."""
    t = float(special.stdtrit(num_probes - 1, 0.5 + confidence / 2.0)) if num_probes > 1 else math.inf
    est, se = g["trace_L"].to_numpy(float), g["trace_L_stderr"].to_numpy(float)
    method = (f"largest of {len(g)} points' t intervals over {num_probes} probes (df = {num_probes - 1}), each at "
              f"{confidence:.4g}")
    if not math.isfinite(t) or not np.all(np.isfinite(se)) or np.all(se == 0):
        return Interval(float(est.max()) / scale, None, None, confidence, len(g), 1, None,
                        method + " — no interval: no probe spread")
    return Interval(float(est.max()) / scale, float((est - t * se).max()) / scale, float((est + t * se).max()) / scale,
                    confidence, len(g), 1, num_probes - 1, method)


@claim("eq17_laplacian_c2", "eq. 17, App. A eq. 56", "ΔL(θ) ≤ C₂ for every θ (C₂ ≈ 5.7·10⁶ from C₁ ≈ 7.6 by "
       "eq. 55–56)", "ΔL ≤ C₂", "per random ray: largest tr ∇²L over its points / C₂ (Hutchinson, t over probes, "
       "Bonferroni over rays × points)", Region.at_most(1.0))
def eq17_laplacian_c2(ctx: Context) -> Measured:
    return _on_rays(ctx, "tr ∇²L at every radius", _laplacian_over_c2)


def _laplacian_over_c2(ctx: Context, pts: pd.DataFrame, doc: dict, where: Where) -> Measured:
    rays = sorted(pts["ray"].unique())
    conf = 1.0 - (1.0 - ctx.confidence) / (len(rays) * pts.groupby("ray").size().max())
    c2 = paper_c2()
    units = [(f"ray {ray}", laplacian_max_interval(g, ctx.params.rays.num_probes, conf, c2))
             for ray, g in pts.groupby("ray")]
    low = ", ".join(f"ray {ray}: {g['trace_L'].min() / c2:.3g}" for ray, g in pts.groupby("ray"))
    peak = ", ".join(f"ray {ray}: |ΔL| peaks at ‖θ‖² = {g['theta_sq'].iloc[int(g['trace_L'].abs().argmax())]:.3g}"
                     for ray, g in pts.groupby("ray"))
    return from_units(units, where + f", each point's interval at {conf:.4g}",
                      join(f"smallest ΔL / C₂ (Corollary 1 needs ΔL bounded below): {low}", peak,
                           _our_constants(ctx, doc)))


def _checkpoint_rows(ctx: Context, positive_lam: bool) -> tuple[pd.DataFrame, tuple[str, ...], Where]:
    m, excl = ctx.learned(ctx.m)
    if positive_lam:
        m = m[m["lam"] > 0].reset_index(drop=True)
    variants = ", ".join(sorted(m["variant"].unique())) or "no run"
    lams = ", ".join(f"{x:g}" for x in sorted(m["lam"].unique())) or "none"
    return m, excl, Where(f"{ctx.dataset}, {variants}, λ = {lams}, {m.groupby(['variant', 'lam', 'seed']).ngroups} "
                          f"learned runs, {len(m)} checkpoints")


@claim("eq17_checkpoints", "eq. 17, App. A eq. 55–56", "‖∇L‖ ≤ C₁ ≈ 7.6 and ΔL ≤ C₂ ≈ 5.7·10⁶ at every θ, so at "
       "every checkpoint", "holds at every checkpoint", "fraction of learned runs (every update rule) whose every "
       "checkpoint has ‖∇L‖ ≤ C₁ and tr ∇²L ≤ C₂, Clopper–Pearson over runs", Region.at_least(0.95))
def eq17_checkpoints(ctx: Context) -> Measured:
    m, excl, where = _checkpoint_rows(ctx, positive_lam=False)
    if m.empty:
        return none(join("no learned run", left_out_note(excl)), where, excluded=excl)
    c2 = paper_c2()
    g, t = np.sqrt(m["grad_L_sq_norm"].to_numpy(float)) / C1, m["trace_L_mean"].to_numpy(float) / c2
    iv = run_proportion_interval((g <= 1) & (t <= 1), run_codes(m), ctx.confidence)
    return Measured(iv, where, join(f"largest ‖∇L‖/C₁ = {g.max():.3g}, largest tr ∇²L/C₂ = {t.max():.3g}",
                                    left_out_note(excl)), excluded=excl)


@claim("psi_positive_checkpoints", "eq. 22–24 (Theorem 1's C_LS bound)", "C_LS ≤ sup_θ s/Ψ_s(θ): a bound only "
       "where Ψ_s > 0, so at every checkpoint", "Ψ_s > 0", "fraction of learned runs at λ > 0 (every update rule) "
       "whose every checkpoint has Ψ_s > 0, Clopper–Pearson over runs", Region.at_least(0.95))
def psi_positive(ctx: Context) -> Measured:
    m, excl, where = _checkpoint_rows(ctx, positive_lam=True)
    if m.empty:
        return none(join("no learned run at λ > 0", left_out_note(excl)), where, excluded=excl)
    psi = m[ctx.psi].to_numpy(float)
    iv = run_proportion_interval(psi > 0, run_codes(m), ctx.confidence)
    top = m.loc[int(np.argmax(psi))]
    parts = (f"median over the checkpoints: tr ∇²L = {m['trace_L_mean'].median():.3g}, λd = {m['lam_d'].median():.3g}, "
             f"‖∇F‖²/s = {(m['grad_F_sq_norm'] / ctx.s).median():.3g}")
    return Measured(iv, where, join(f"Ψ_s ≤ 0 at {int((psi <= 0).sum())} of {len(psi)} checkpoints; largest Ψ_s = "
                                    f"{psi.max():.4g} ({top['variant']} λ = {top['lam']:g} seed {int(top['seed'])} step "
                                    f"{int(top['step'])})", parts, _psi_on_rays(ctx), left_out_note(excl)),
                    excluded=excl)


def _psi_on_rays(ctx: Context) -> str:
    """Where Ψ_s > 0 along the random rays, per λ > 0 of ``rays.lambdas`` (empty without rays)."""
    try:
        table, _ = rays_table(ctx.params, ctx.root)
    except ValueError:
        return ""
    rnd = table[(table["kind"] == "random") & (table["lam"] > 0)]
    parts = []
    for lam, g in rnd.groupby("lam"):
        pos = g[g[ctx.psi] > 0]
        start = f"the smallest ‖θ‖² among them {pos['theta_sq'].min():.3g}" if len(pos) else "none"
        parts.append(f"λ = {lam:g}: {len(pos)} of {len(g)} points ({start})")
    return "along the random rays Ψ_s > 0 at " + "; ".join(parts) if parts else ""
