"""Fig 9: CV of the Hutchinson trace estimate vs step, measured and predicted (SPEC §5).

Left: the per-sample CV, std(vᵀ∇²L v)/|tr∇²L| — measured from the M samples (std =
stderr·√M) and predicted as √Var/|tr∇²L| with Var = 2(‖∇²L‖_F² − Σ diag²) (exact for
Rademacher probes when Σ diag² is measured) or 2‖∇²L‖_F² (the bound used when it is not),
‖∇²L‖_F² from the same probes (``frob_sq``). Right: the relative error of the M-probe mean,
stderr/|tr∇²L|, and its prediction (the left one divided by √M). Lines are means over
seeds, bars ± s.e.m. The grey line marks the paper's "√(2d/M) ≈ 4.9%", which is not a
CV (√(2d/M) is itself ≈ 1976 at d = 1.25e8, M = 64).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import lam_color, lam_label, plain_log_ticks
from villani.io.results import measurements
from villani.stats import predicted_cv

PAPER_CLAIM = 0.049


def cv_table(m: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint: measured and predicted CV (per sample and of the M-probe mean)."""
    out = m[["lam", "seed", "step", "trace_L_mean", "trace_L_stderr", "trace_L_frob_sq", "trace_L_diag_sq",
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
    t = cv_table(measurements(params, root))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    cols = [("cv_sample_measured", "cv_sample_predicted", "per-sample CV  std(vᵀ∇²L v) / |tr ∇²L|"),
            ("cv_mean_measured", "cv_mean_predicted", "relative error of the mean  stderr / |tr ∇²L|")]
    for ax, (meas, pred, ylabel) in zip(axes, cols):
        for lam, d in t.groupby("lam"):
            g = d.groupby("step")
            c = lam_color(lam)
            ax.errorbar(g[meas].mean().index, 100 * g[meas].mean(), yerr=100 * g[meas].agg(_sem), color=c,
                        marker="o", ms=4, lw=1.4, capsize=2, label=f"{lam_label(lam)}: measured")
            ax.plot(g[pred].mean().index, 100 * g[pred].mean(), color=c, ls="--", lw=1.2,
                    label=f"{lam_label(lam)}: predicted from ‖∇²L‖_F²")
        ax.set(xlabel="optimizer step (checkpoint)", ylabel=f"{ylabel}  (%)")
        ax.set_yscale("log")
    m_probes = int(t["trace_L_num_probes"].max())
    axes[1].axhline(100 * PAPER_CLAIM, color="0.5", ls=":", lw=1.2, label="paper's claim √(2d/M) ≈ 4.9%")
    axes[0].set_title("Spread of one Hutchinson sample")
    axes[1].set_title(f"Error of the M = {m_probes} probe estimate")
    for ax in axes:
        plain_log_ticks(ax)
    handles, labels = axes[1].get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: labels[i])
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower center", ncol=4, fontsize=8,
               bbox_to_anchor=(0.5, -0.1), frameon=False)
    fig.suptitle(f"{params['data']['name']}: coefficient of variation of the trace estimate of tr ∇²L", y=1.02)
    fig.tight_layout()
    return save(fig, t, params, root, name)
