"""Fig 9: CV of the Hutchinson trace estimate vs step, measured and predicted (SPEC §5).

Left: the per-sample CV, std(vᵀ∇²L v)/|tr∇²L| — measured from the M samples (std =
stderr·√M) and predicted as √Var/|tr∇²L| with Var = 2(‖∇²L‖_F² − Σ diag²) (exact for
Rademacher probes when Σ diag² is measured) or 2‖∇²L‖_F² (the bound used when it is not),
‖∇²L‖_F² from the same probes (``frob_sq``). Right: the relative error of the M-probe mean,
stderr/|tr∇²L|, and its prediction (the left one divided by √M). Lines are means over
seeds, bars ± s.e.m.; one line per λ (colour) and update rule (line style and marker:
AdamW, Adam on F, Langevin SGD on F). The grey line marks the paper's "√(2d/M) ≈ 4.9%",
which is not a CV (√(2d/M) is itself ≈ 1976 at d = 1.25e8, M = 64).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import DOUBLE, lam_color, plain_log_ticks, run_label, variant_style, wrap
from villani.io.results import measurements
from villani.stats import predicted_cv

PAPER_CLAIM = 0.049


def cv_table(m: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint: measured and predicted CV (per sample and of the M-probe mean)."""
    out = m[["variant", "lam", "seed", "step", "trace_L_mean", "trace_L_stderr", "trace_L_frob_sq", "trace_L_diag_sq",
             "trace_L_num_probes", "lam_d"]].copy()
    M = out["trace_L_num_probes"].to_numpy(float)
    mean = out["trace_L_mean"].abs().to_numpy(float)
    out["cv_mean_measured"] = out["trace_L_stderr"] / mean
    out["cv_sample_measured"] = out["cv_mean_measured"] * np.sqrt(M)
    pred = []
    for r in out.itertuples():
        diag = None if not np.isfinite(r.trace_L_diag_sq) else max(float(r.trace_L_diag_sq), 0.0)
        p = (predicted_cv(r.trace_L_frob_sq, r.trace_L_mean, int(r.trace_L_num_probes), diag)
             if np.isfinite(r.trace_L_frob_sq) else None)
        pred.append(np.nan if p is None else p)
    out["cv_mean_predicted"] = pred
    out["cv_sample_predicted"] = out["cv_mean_predicted"] * np.sqrt(M)
    out["prediction"] = np.where(out["trace_L_diag_sq"].notna(), "exact (Rademacher)", "bound 2‖H‖_F²")
    out["cv_mean_measured_F"] = out["trace_L_stderr"] / (out["trace_L_mean"] + out["lam_d"]).abs()
    return out


def _sem(x) -> float:
    return float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    t = cv_table(measurements(params, root, variants=None))
    fig, axes = plt.subplots(1, 2, figsize=(DOUBLE, 3.4))
    cols = [("cv_sample_measured", "cv_sample_predicted", "per-sample CV, std(vᵀ∇²L v)/|tr∇²L|"),
            ("cv_mean_measured", "cv_mean_predicted", "relative error, stderr/|tr∇²L|")]
    for ax, (meas, pred, ylabel) in zip(axes, cols):
        for (variant, lam), d in t.groupby(["variant", "lam"], sort=False):
            g = d.groupby("step")
            c, st = lam_color(lam), variant_style(variant)
            ax.errorbar(g[meas].mean().index, 100 * g[meas].mean(), yerr=100 * g[meas].agg(_sem), color=c,
                        marker=st["marker"], ls=st["ls"], ms=3.5, lw=1.1,
                        label=f"{run_label(variant, lam)}: measured" if ax is axes[0] else None)
            ax.plot(g[pred].mean().index, 100 * g[pred].mean(), color=c, ls=st["ls"], lw=0.7, alpha=0.6)
        ax.set(xlabel="optimizer step (checkpoint)", ylabel=f"{ylabel} (%)")
        ax.set_yscale("log")
    m_probes = int(t["trace_L_num_probes"].max())
    axes[1].axhline(100 * PAPER_CLAIM, color="0.5", ls=":", lw=1.0)
    axes[0].set_title("spread of one Hutchinson sample")
    axes[1].set_title(f"error of the M = {m_probes} probe estimate")
    for ax in axes:
        plain_log_ticks(ax)
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="0.4", lw=0.7, alpha=0.6),
                plt.Line2D([], [], color="0.5", ls=":", lw=1.0)]
    labels += ["thin line: predicted from ‖∇²L‖_F² (same colour and style)", "paper's claim √(2d/M) ≈ 4.9%"]
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    fig.suptitle(wrap(f"{params['data']['name']}: coefficient of variation of the Hutchinson estimate of tr ∇²L, "
                      "measured and predicted (SPEC §5)", DOUBLE))
    return save(fig, t, params, root, name)
