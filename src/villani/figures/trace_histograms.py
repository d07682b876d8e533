"""Fig 8: histograms of the M Hutchinson samples at an early, middle and late checkpoint.

One row per update rule: the AdamW run at our λ matched to the paper's 10⁻³ by λ·η·T (the λ
of the ledger's Fig 8 rows; unmatched, the middle positive λ), and the Langevin run (eq. 36)
at its first λ when there is one; the seed is the first. The samples are vᵀ∇²L v (Rademacher
v): the stochastic part — or, for a deflated estimate, tr(QᵀHQ) + (Pv)ᵀ∇²L(Pv): the exact
trace over the top-k Lanczos space (the same in every sample, marked by a dotted line) plus
one Hutchinson sample of the remainder; their spread is the remainder's only, and the axis
label says so. For Rademacher probes vᵀ∇²F v = vᵀ∇²L v + λd exactly, so the ∇²F samples are
these shifted by λd. Each panel's title gives ‖θ‖², the mean tr∇²L and λd; the variance of
one *plain* sample, 2(‖∇²L‖_F² − Σ(∇²L)_ii²), and its CV_F — the numbers the ledger's Fig 8
rows (the CVs, the variance's ‖θ‖² exponent within runs) and Table III's are computed from,
whatever estimator drew the samples (:func:`plain`); then the CV_F and the Shapiro–Wilk p
(shift-invariant) of the M samples drawn. The paper's "CV" is of the ∇²F samples: the shift
by λd shrinks it without any change in the estimator's error. The curve is the normal
density with the sample mean and standard deviation."""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from villani.figures.style import DOUBLE, fmt_num, lam_color, middle_lam, run_label, wrap
from villani.io.results import is_doubly_stochastic, measurements, trace_samples
from villani.plan.paper_lambda import match
from villani.plan.runs import Run
from villani.plan.schedule import checkpoint_steps
from villani.statistics.samples import hutchinson_variance, predicted_cv, sample_stats


def chosen_steps(params: Mapping) -> list[int]:
    steps = checkpoint_steps(params["train"])
    picks = [steps[0], steps[len(steps) // 2], steps[-1]]
    return list(dict.fromkeys(picks))


def chosen_runs(params: Mapping) -> list[Run]:
    """The AdamW run at our λ matched to the paper's 10⁻³ by λ·η·T — the λ of the ledger's Fig 8
    rows (:func:`villani.plan.paper_lambda.match`) — or, unmatched, the middle positive λ; and the
    first Langevin run; first seed."""
    ds, t = params.data.name, params.train
    mt = match(params, "middle")
    out = [Run(ds, "adamw", mt.ours if mt.ours is not None else middle_lam(t.lambdas), t.seeds[0])]
    if t.langevin.lambdas:
        out.append(Run(ds, "langevin", t.langevin.lambdas[0], t.seeds[0]))
    return out


def plain(rec: Mapping) -> tuple[float | None, float | None]:
    """(Var(vᵀ∇²L v) of one *plain* Rademacher sample, its CV_F in %) at a checkpoint, from the
    recorded ‖∇²L‖_F² and Σ(∇²L)_ii² (:func:`villani.statistics.samples.hutchinson_variance`; without the
    diagonal, its 2‖∇²L‖_F² bound) — the numbers the ledger's Fig 8 and Table III rows use,
    whatever estimator drew the histogram's samples."""
    frob, diag = rec.get("trace_L_frob_sq"), rec.get("trace_L_diag_sq")
    if frob is None or not np.isfinite(frob):
        return None, None
    diag = None if diag is None or not np.isfinite(diag) else max(float(diag), 0.0)
    var = hutchinson_variance(max(float(frob), 0.0), diag)
    cv = predicted_cv(max(float(frob), 0.0), float(rec["laplacian_F"]), 1, diag)
    return var, None if cv is None else 100 * cv


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    m = measurements(params, root, variants=None)
    picks = chosen_steps(params)
    rs = chosen_runs(params)
    fig, axes = plt.subplots(len(rs), len(picks), figsize=(DOUBLE, 2.9 * len(rs) + 0.6), squeeze=False)
    rows = []
    for axrow, run in zip(axes, rs):
        recs = {int(r["step"]): r for _, r in m[(m["variant"] == run.variant) & (m["lam"] == run.lam)
                                                & (m["seed"] == run.seed)].iterrows()}
        for ax, phase, step in zip(axrow, ("early", "middle", "late"), picks):
            x = trace_samples(params, run, step, root)
            rec = recs[step]
            lam_d = float(rec["lam_d"])
            rank = int(rec.get("trace_L_deflation_rank", 0) or 0)
            st = sample_stats(x)
            st_f = sample_stats(x + lam_d)
            ax.hist(x, bins=max(6, int(np.sqrt(x.size)) + 2), color=lam_color(run.lam), alpha=0.6,
                    edgecolor="white", density=True)
            if st.std:
                grid = np.linspace(x.min() - 0.5 * st.std, x.max() + 0.5 * st.std, 200)
                ax.plot(grid, sps.norm.pdf(grid, st.mean, st.std), color="0.2", lw=1.0)
            ax.axvline(st.mean, color="0.2", ls="--", lw=0.8)
            if rank:
                ax.axvline(float(rec["trace_L_exact_part"]), color="0.5", ls=":", lw=1.0)
            cv_f = fmt_num(100 * st_f.cv if st_f.cv else None, 2)
            var, cv_plain = plain(rec)
            # one short item per line: a panel is a third of the page wide, and a mean like
            # −1.16e+04 next to the step overflowed it (the laptop run's late panel)
            ax.set_title(f"{phase}: step {step}, ‖θ‖² = {fmt_num(float(rec['theta_sq_norm']), 3)}\n"
                         f"tr∇²L ≈ {fmt_num(st.mean, 3)}, λd = {fmt_num(lam_d, 3)}\n"
                         f"plain: Var {fmt_num(var, 2)}, CV_F {fmt_num(cv_plain, 2)}%\n"
                         f"{x.size} drawn: CV_F {cv_f}%, SW p {fmt_num(st.shapiro_p, 2)}", fontsize=7)
            ds = is_doubly_stochastic(rec.get("trace_L_estimator"))
            ax.set(xlabel="group mean of vᵀ∇²L_B v (doubly stochastic)" if ds else
                   f"deflated sample (k = {rank})" if rank else "sample vᵀ∇²L v")
            rows += [{"variant": run.variant, "phase": phase, "step": step, "lam": run.lam, "seed": run.seed,
                      "probe": i, "sample_L": v, "sample_F": v + lam_d, "lam_d": lam_d, "cv_F": st_f.cv,
                      "cv_L": st.cv, "shapiro_p": st.shapiro_p, "deflation_rank": rank,
                      "theta_sq_norm": float(rec["theta_sq_norm"]), "plain_var": var,
                      "plain_cv_F": None if cv_plain is None else cv_plain / 100} for i, v in enumerate(x)]
        axrow[0].set_ylabel(wrap(f"{run_label(run.variant, run.lam)}\ndensity", 2.0, 8))
    fig.suptitle(wrap(f"{params['data']['name']}: the Hutchinson samples (histogram), their normal fit (curve) and mean (dashed)"
                      + (", exact part tr(QᵀHQ) (dotted)" if rows and rows[-1]["deflation_rank"] else "")
                      + f", seed {rs[0].seed}", DOUBLE))
    return save(fig, pd.DataFrame(rows), params, root, name)
