r"""Table III per dataset, and Fig 9's comparisons across λ and phases (measured here or needs scale).

Table III has a PTB and a WikiText-103 half; each half's rows are claims about that corpus.
A ledger tests its own corpus's half (the embedded default, a corpus the paper did not use,
tests PTB's: :func:`villani.claims.catalogue.paper.table3_for`); the other half's rows *need scale*
(the other corpus at GPT-Neo-125M, priced by :mod:`villani.claims.catalogue.price`). Every CV and
trace magnitude also needs the paper's λd/tr ∇²F (:func:`villani.claims.catalogue.fig8.transfer`).

Fig 9's phases (initial 0–5k steps, transition to 35k, stable after; of the PTB run's
69,297 — 40 epochs × 887k tokens / 512, :data:`villani.plan.paper_lambda.PAPER_STEPS`) are
tested as fractions of training, where our checkpoints resolve them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from villani.claims.catalogue.context import Context, join, none
from villani.claims.catalogue.paper import FIG9_PHASES, PAPER_LAMBDAS, PAPER_STEPS, TABLE3, TABLE3_DATASETS, table3_for
from villani.claims.catalogue.price import needs_scale
from villani.claims.catalogue.registry import Measured, claim
from villani.claims.catalogue.fig8 import cv_F, per_sample_cv, phase_rows, priced, transfer
from villani.claims.catalogue.verdict import Region

PREFIX = {"ptb": "table3_", "wikitext103": "table3_wt103_"}


def _other_corpus(ctx: Context, ds: str, lams: int) -> Measured | None:
    """A *needs scale* row when Table III's ``ds`` half is not our corpus's, else ``None``."""
    ours = table3_for(ctx.dataset)[0]
    if ds == ours:
        return None
    return needs_scale(ctx, f"a claim about Table III's {TABLE3_DATASETS[ds]} rows; this ledger's corpus is "
                       f"{ctx.dataset} (tested against {TABLE3_DATASETS[ours]}'s)", ds, lams=lams)


def _difference(ctx: Context, a: str, b: str, phase: str, ds: str | None = None) -> Measured:
    ma, mb = ctx.match(a), ctx.match(b)
    m, excl = ctx.rows("adamw", [ma.ours, mb.ours])
    m = phase_rows(m, phase)
    where = ctx.where("adamw", [ma.ours, mb.ours], m, extra=f", {phase} checkpoints")
    if ma.ours is None or mb.ours is None:
        return none(ma.text() if ma.ours is None else mb.text(), where, match_=ma)
    m = m.assign(cv=cv_F(m))

    def diff(g):
        x, y = g[g["lam"] == ma.ours]["cv"], g[g["lam"] == mb.ours]["cv"]
        return float(x.mean() - y.mean()) if len(x) and len(y) else None

    why = next((w for w in (transfer(ctx, m[m["lam"] == lam], n, ds) for lam, n in ((ma.ours, a), (mb.ours, b))) if w),
               None)
    return priced(ctx, ctx.seed_measured(m, diff, where, match=ma, excluded=excl), why, lams=2, dataset=ds or "ptb")


def _ratio(ctx: Context, ds: str) -> Measured:
    mn, md = ctx.match("strong"), ctx.match("zero")
    m, excl = ctx.rows("adamw", [mn.ours, md.ours])
    where = ctx.where("adamw", [mn.ours, md.ours], m)
    if mn.ours is None or md.ours is None:
        return none((md if mn.ours is not None else mn).text(), where, match_=mn)

    def ratio(g):
        a, b = g[g["lam"] == mn.ours]["laplacian_F"], g[g["lam"] == md.ours]["laplacian_F"]
        return float(a.mean() / b.mean()) if len(a) and len(b) and b.mean() != 0 else None

    got = ctx.seed_measured(m, ratio, where, match=mn, excluded=excl, scale="log")
    means = m.groupby(["seed", "lam"])["laplacian_F"].mean().unstack("lam")
    parts = ", ".join(f"seed {int(sd)}: {r[mn.ours]:.4g} / {r[md.ours]:.4g}" for sd, r in means.iterrows()
                      if mn.ours in r and md.ours in r)
    got = Measured(got.interval, got.measured_on, join(got.note, f"mean tr ∇²F at λ = {mn.ours:g} / at λ = "
                   f"{md.ours:g}: {parts} (λd = {m[m['lam'] == mn.ours]['lam_d'].max():.4g} at the run's own "
                   "λ, the λ·η·T match of 10⁻²): the denominator, tr ∇²L at λ = 0, decides the spread"),
                   match=mn, excluded=excl)
    return priced(ctx, got, transfer(ctx, m[m["lam"] == mn.ours], "strong", ds), lams=2, dataset=ds)


def _declare(ds: str) -> None:
    """Table III's ``ds`` half: the relative error per λ, the trace ratio, the error falling with λ."""
    rows, name = TABLE3[ds], TABLE3_DATASETS[ds]
    for key, lam_text in (("zero", "0"), ("middle", "10⁻³"), ("strong", "10⁻²")):
        value = rows[key][1]
        claim(f"{PREFIX[ds]}rel_error_{key}", "Table III", f"Relative error {value:g} at λ = {lam_text} ({name})",
              f"{value:g}", f"per-sample CV of plain Hutchinson samples vᵀ∇²F v, mean over all checkpoints, our λ "
              f"matched to {PAPER_LAMBDAS[key]:g}; t interval of the logs over seeds, back-transformed",
              Region.around(value, 0.25, relative=True))(
            lambda ctx, key=key: _other_corpus(ctx, ds, 1) or per_sample_cv(ctx, key, "all", dataset=ds))
    strong, zero = rows["strong"][0], rows["zero"][0]
    claim(f"{PREFIX[ds]}trace_ratio", "Table III", f"Mean trace {strong:g} (λ = 10⁻²) vs {zero:g} (λ = 0), ×10⁸ "
          f"({name})", f"ratio {strong / zero:.3g}", "per seed: mean tr ∇²F at the λ matched to 1e-2 / at λ = 0; t "
          "interval of the logs over seeds, back-transformed (the geometric mean)",
          Region.around(round(strong / zero, 1), 0.25, relative=True))(
        lambda ctx: _other_corpus(ctx, ds, 2) or _ratio(ctx, ds))
    claim(f"{PREFIX[ds]}error_falls_with_lam", "Table III", f"The relative error falls with λ ({name}: "
          f"{rows['zero'][1]:g} at 0, {rows['strong'][1]:g} at 10⁻²)", "CV(10⁻²) < CV(0)",
          "per seed: per-sample CV at the λ matched to 1e-2 − at λ = 0 (all checkpoints), t over seeds",
          Region.direction(-1))(lambda ctx: _other_corpus(ctx, ds, 2) or _difference(ctx, "strong", "zero", "all", ds))


for _ds in TABLE3:
    _declare(_ds)


@claim("fig9_stronger_lam_ends_lower", "Fig 9", "Stronger λ ends at a slightly lower CV", "CV(10⁻²) < CV(10⁻³)",
       "per seed: per-sample CV at the last checkpoint, λ matched to 1e-2 − to 1e-3, t over seeds",
       Region.direction(-1))
def fig9_stronger(ctx: Context) -> Measured:
    return _difference(ctx, "strong", "middle", "late")


def stable_step(g: pd.DataFrame, within: float = 0.1) -> float | None:
    """First checkpoint step from which the per-sample CV stays within ``within`` (relative) of
    its last value (Fig 9's "stable regime")."""
    g = g.sort_values("step")
    cv = cv_F(g)
    g, cv = g[np.isfinite(cv)], cv[np.isfinite(cv)]  # the checkpoints with a ‖∇²L‖_F² (measure.ds_blocks)
    if cv.size == 0 or cv[-1] == 0:
        return None
    later = np.flatnonzero(np.abs(cv / cv[-1] - 1.0) > within)
    return float(g["step"].iloc[later[-1] + 1]) if later.size else float(g["step"].iloc[0])


@claim("fig9_stronger_lam_stabilises_earlier", "Fig 9", "Stronger λ reaches the stable CV regime earlier",
       "earlier at 10⁻² than at 10⁻³", "per seed: first step from which the CV stays within 10% of its last value, "
       "λ matched to 1e-2 − to 1e-3, t over seeds", Region.direction(-1))
def fig9_stabilises(ctx: Context) -> Measured:
    ma, mb = ctx.match("strong"), ctx.match("middle")
    m, excl = ctx.rows("adamw", [ma.ours, mb.ours])
    where = ctx.where("adamw", [ma.ours, mb.ours], m)
    if ma.ours is None or mb.ours is None:
        return none(ma.text() if ma.ours is None else mb.text(), where, match_=ma)

    def diff(g):
        a, b = (stable_step(g[g["lam"] == lam]) if (g["lam"] == lam).any() else None for lam in (ma.ours, mb.ours))
        return None if a is None or b is None else a - b

    why = next((w for w in (transfer(ctx, m[m["lam"] == lam], n) for lam, n in ((ma.ours, "strong"),
                                                                             (mb.ours, "middle"))) if w), None)
    return priced(ctx, ctx.seed_measured(m, diff, where, match=ma, excluded=excl), why, lams=2)


def _phase_end(ctx: Context, within: float, paper_step: int) -> Measured:
    """Per seed: the step from which the CV stays within ``within`` of its last value, as a
    fraction of training, at the λ matched to 10⁻³ (the paper's: ``paper_step``/69,297)."""
    mt = ctx.match("middle")
    m, excl = ctx.rows("adamw", [mt.ours])
    steps = ctx.params.train.steps
    where = ctx.where("adamw", [mt.ours], m)
    if mt.ours is None:
        return none(mt.text(), where, match_=mt)
    got = ctx.seed_measured(m, lambda g: (lambda s: None if s is None else s / steps)(stable_step(g, within)), where,
                            match=mt, excluded=excl)
    spacing = np.diff(sorted(m["step"].unique())) / steps if m["step"].nunique() > 1 else np.array([1.0])
    note = (f"the paper's {paper_step:,} of {PAPER_STEPS:,} steps is {paper_step / PAPER_STEPS:.3f} of training; our "
            f"checkpoints resolve {float(spacing.max()):.2g} of training")
    got = Measured(got.interval, got.measured_on, "; ".join(x for x in (got.note, note) if x), match=mt,
                   excluded=excl)
    return priced(ctx, got, transfer(ctx, m, "middle"), what="the CV at 60 checkpoints per run")


_OF = f"(of {PAPER_STEPS / 1000:.0f}k)"
for _cid, _what, _within, _tol, _i in (("fig9_initial_phase_5k", f"The initial high-variance phase ends at ≈ 5k steps "
                                        f"{_OF}", 0.5, 0.5, 0),
                                       ("fig9_stable_phase_35k", f"The CV is stable from ≈ 35k steps {_OF}", 0.1,
                                        0.25, 1)):
    claim(_cid, "Fig 9", _what, f"{FIG9_PHASES[_i] / PAPER_STEPS:.3f} of training",
          f"per seed: first step from which the CV stays within {100 * _within:g}% of its last value / steps trained, "
          "λ matched to 1e-3, t over seeds", Region.around(FIG9_PHASES[_i] / PAPER_STEPS, _tol, relative=True))(
        lambda ctx, w=_within, i=_i: _phase_end(ctx, w, FIG9_PHASES[i]))
