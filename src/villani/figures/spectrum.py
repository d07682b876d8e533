"""Fig 4: top-k eigenvalues μ of ∇²F and μ_max/μ_median against ‖θ‖² across checkpoints (λ > 0).

Eigenvalues of the Hessian are μ (weight decay is λ; the two never share a symbol).
Left: the ``measure.top_k`` largest eigenvalues (Lanczos with full re-orthogonalisation)
of every checkpoint of every run with λ > 0, as small points; μ_max as a line per run with
its Ritz residual as the error bar; dashed, per λ, the paper's λ_max ∼ λ‖θ‖ taken literally
(μ = λ‖θ‖ at the run's own λ — the λ·η·T match of the paper's — over that λ's range of ‖θ‖²):
the claim is that μ_max runs parallel to it (exponent 1 in ‖θ‖; the ledger's
``fig4_lammax_linear`` fits that exponent within runs, after step 0). Open markers: step 0,
the initialisation every λ shares, which the ledger's fits leave out. Right: the spectral ratio μ_max/μ_median, μ_median the
median of the SLQ spectral density. Both against ‖θ‖² of the checkpoint; colour = λ,
line style and marker = update rule. Since ∇²F = ∇²L + λI, every eigenvalue of ∇²F is
one of ∇²L plus λ: when the bulk of ∇²L sits near 0, μ_median ≈ λ and the ratio is about
μ_max/λ. The title says, from the data, whether the ratio rises or falls with λ.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np

from villani.figures.style import DOUBLE, lam_color, plain_log_ticks, run_label, value_axis, variant_style, wrap
from villani.io.results import eigen_frame, measurements
from villani.plan.schedule import checkpoint_steps


def ratio_trend(m, first_step: int) -> str:
    """"rises"/"falls"/"is flat" with λ: the median ratio of the AdamW runs at the smallest vs largest λ
    over the checkpoints after ``first_step`` (θ₀, the same at every λ: the ledger leaves it out too)."""
    a = m[(m["variant"] == "adamw") & (m["step"] > first_step)].dropna(subset=["spectral_ratio"])
    lams = sorted(a["lam"].unique())
    if len(lams) < 2:
        return ""
    lo, hi = (float(a[a["lam"] == x]["spectral_ratio"].median()) for x in (lams[0], lams[-1]))
    verb = "rises" if hi > lo else "falls" if hi < lo else "is flat"
    return (f" — μ_max/μ_median {verb} with λ (AdamW, median over checkpoints after step {first_step}: {lo:.3g} at "
            f"λ = {lams[0]:g}, {hi:.3g} at λ = {lams[-1]:g})")


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    m = measurements(params, root, variants=None)
    m = m[m["lam"] > 0].reset_index(drop=True)
    if m.empty:
        raise ValueError("Fig 4 needs a λ > 0 in train.lambdas")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(DOUBLE, 3.5))
    for lam, g in m.groupby("lam"):
        th = np.geomspace(float(g["theta_sq_norm"].min()), float(g["theta_sq_norm"].max()), 20)
        a1.plot(th, lam * np.sqrt(th), color=lam_color(lam), ls=(0, (4, 2)), lw=0.9, alpha=0.9)
    for (variant, lam), g in m.groupby(["variant", "lam"], sort=False):
        c, st = lam_color(lam), variant_style(variant)
        e = eigen_frame(g)
        a1.scatter(e["theta_sq_norm"], e["eigenvalue"], s=5, color=c, marker=st["marker"], alpha=0.3, lw=0)
        for k, (_, d) in enumerate(g.groupby("seed")):
            d = d.sort_values("step").dropna(subset=["lambda_max"])  # measure.spectrum_every: spectrum checkpoints only
            label = run_label(variant, lam) if k == 0 else None
            a1.errorbar(d["theta_sq_norm"], d["lambda_max"], yerr=d["lambda_max_residual"], color=c,
                        marker=st["marker"], ls=st["ls"], ms=3.5, lw=1.0, label=label)
            a2.plot(d["theta_sq_norm"], d["spectral_ratio"], color=c, marker=st["marker"], ls=st["ls"], ms=3.5,
                    lw=1.0)
            first = d[d["step"] == d["step"].min()]  # θ₀, shared by every λ: out of the ledger's fits
            for ax, col in ((a1, "lambda_max"), (a2, "spectral_ratio")):
                ax.plot(first["theta_sq_norm"], first[col], ls="none", marker=st["marker"], ms=4.5, mfc="white",
                        mec=c, zorder=5)
    eig = eigen_frame(m)
    value_axis(a1, np.concatenate([eig["eigenvalue"], m["lam"] * np.sqrt(m["theta_sq_norm"])]))
    value_axis(a1, eig["theta_sq_norm"], axis="x", decades=1.0)
    value_axis(a2, m["spectral_ratio"])
    value_axis(a2, m["theta_sq_norm"], axis="x", decades=1.0)
    for ax in (a1, a2):
        plain_log_ticks(ax)
    k = int(m["top_k"].max())
    a1.set(xlabel="‖θ‖² at the checkpoint", ylabel="eigenvalue μ of ∇²F",
           title=f"top-{k} eigenvalues μ (points); μ_max ± Ritz residual (lines)\n"
                 "dashed: λ‖θ‖, the paper's λ_max ∼ λ‖θ‖; open: step 0")
    undefined = int((m["spectral_ratio"].isna() & m["lambda_max"].notna()).sum())
    a2.set(xlabel="‖θ‖² at the checkpoint", ylabel="μ_max / μ_median",
           title="spectral ratio (SLQ median), one line per run"
                 + (f"\n{undefined} checkpoint(s) with μ_median ≤ 0: not drawn" if undefined else ""))
    fig.legend(loc="outside lower center", ncol=3)
    trend = ratio_trend(m, checkpoint_steps(params["train"])[0])
    fig.suptitle(wrap(f"{params['data']['name']}: Hessian spectrum of F across checkpoints, λ > 0{trend}",
                      DOUBLE))
    table = eigen_frame(m).merge(
        m[["variant", "lam", "seed", "step", "lambda_max", "lambda_median", "spectral_ratio"]],
        on=["variant", "lam", "seed", "step"], how="left")
    table = table[np.isfinite(table["eigenvalue"])]
    return save(fig, table, params, root, name)
