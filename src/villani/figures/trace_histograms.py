"""Fig 8: histograms of the M Hutchinson samples at an early, middle and late checkpoint.

λ is the paper's 1e-3 when it is in ``train.lambdas``, else the middle positive λ; the
seed is the first. The samples are vᵀ∇²L v (Rademacher v): the stochastic part — or, for a
deflated estimate, tr(QᵀHQ) + (Pv)ᵀ∇²L(Pv): the exact trace over the top-k Lanczos space
(the same in every sample, marked) plus one Hutchinson sample of the remainder; their
spread is the remainder's only, and the axis label and box say so. For
Rademacher probes vᵀ∇²F v = vᵀ∇²L v + λd exactly, so the ∇²F samples are these shifted by
λd; the box gives the mean tr∇²L, λd, their sum tr∇²F, the per-sample CV of both (the
paper's "CV" is of the ∇²F samples; the shift by λd shrinks it without any change in the
estimator's error) and the Shapiro–Wilk p (shift-invariant). The curve is the normal
density with the sample mean and standard deviation.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from villani.figures.style import fmt_num, lam_color, lam_label, middle_lam, note
from villani.io.results import measurements, trace_samples
from villani.plan.runs import Run
from villani.plan.schedule import checkpoint_steps
from villani.stats import sample_stats


def chosen_steps(params: Mapping) -> list[int]:
    steps = checkpoint_steps(params["train"])
    picks = [steps[0], steps[len(steps) // 2], steps[-1]]
    return list(dict.fromkeys(picks))


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    lam = middle_lam(params["train"]["lambdas"])
    seed = int(params["train"]["seeds"][0])
    run = Run(params["data"]["name"], "adamw", lam, seed)
    m = measurements(params, root)
    recs = {int(r["step"]): r for _, r in m[(m["lam"] == lam) & (m["seed"] == seed)].iterrows()}
    picks = chosen_steps(params)
    fig, axes = plt.subplots(1, len(picks), figsize=(4.6 * len(picks), 4.0), squeeze=False)
    rows = []
    for ax, phase, step in zip(axes[0], ("early", "middle", "late"), picks):
        x = trace_samples(params, run, step, root)
        rec = recs[step]
        lam_d = float(rec["lam_d"])
        rank = int(rec.get("trace_L_deflation_rank", 0) or 0)
        st = sample_stats(x)
        st_f = sample_stats(x + lam_d)
        heights, _, _ = ax.hist(x, bins=max(6, int(np.sqrt(x.size)) + 2), color=lam_color(lam), alpha=0.6, edgecolor="white",
                density=True, label=f"M = {x.size} samples")
        if st.std:
            grid = np.linspace(x.min() - 0.5 * st.std, x.max() + 0.5 * st.std, 200)
            ax.plot(grid, sps.norm.pdf(grid, st.mean, st.std), color="0.2", lw=1.2, label="normal fit")
        ax.axvline(st.mean, color="0.2", ls="--", lw=1, label="mean")
        if rank:
            ax.axvline(float(rec["trace_L_exact_part"]), color="0.5", ls=":", lw=1.2,
                       label=f"tr(QᵀHQ), exact (k = {rank})")
        top = max(float(np.max(heights)), float(sps.norm.pdf(0, 0, st.std)) if st.std else 0.0)
        ax.set_ylim(0, 1.85 * top)  # headroom for the legend and the statistics box
        what = "deflated ∇²L samples" if rank else "∇²L samples"
        note(ax, f"tr∇²L ≈ {fmt_num(st.mean, 4)}\nλd = {fmt_num(lam_d, 4)}\ntr∇²F ≈ {fmt_num(st_f.mean, 4)}\n"
                 f"CV (∇²F samples) = {fmt_num(100 * st_f.cv if st_f.cv else None)}%\n"
                 f"CV ({what}) = {fmt_num(100 * st.cv if st.cv else None)}%\n"
                 f"Shapiro–Wilk p = {fmt_num(st.shapiro_p, 2)}", loc="upper right", fontsize=7)
        xlabel = "deflated sample tr(QᵀHQ) + (Pv)ᵀ∇²L(Pv)" if rank else "Hutchinson sample vᵀ∇²L v"
        ax.set(xlabel=xlabel, ylabel="density", title=f"{phase}: step {step}")
        ax.legend(loc="upper left", fontsize=7)
        rows += [{"phase": phase, "step": step, "lam": lam, "seed": seed, "probe": i, "sample_L": v,
                  "sample_F": v + lam_d, "lam_d": lam_d, "cv_F": st_f.cv, "cv_L": st.cv, "shapiro_p": st.shapiro_p,
                  "deflation_rank": rank}
                 for i, v in enumerate(x)]
    fig.suptitle(f"{params['data']['name']}: Hutchinson trace samples, {lam_label(lam)}, seed {seed}", y=1.02)
    fig.tight_layout()
    return save(fig, pd.DataFrame(rows), params, root, name)
