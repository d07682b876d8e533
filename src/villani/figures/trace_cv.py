"""Fig 9: CV of the Hutchinson trace estimate vs step, measured and predicted (SPEC §5).

Left: the per-sample CV, ``std(sample)/|tr∇²L|`` — measured from the M samples (std =
stderr·√M) and predicted as ``√Var/|tr∇²L|`` with Var the variance of *the estimator used*:
plain Hutchinson, 2(‖∇²L‖_F² − Σ diag²) (exact for Rademacher probes when Σ diag² is
measured) or 2‖∇²L‖_F² (the bound used when it is not); deflated Hutchinson (samples
tr(QᵀHQ) + (Pv)ᵀ∇²L(Pv)), 2(‖PHP‖_F² − Σ(PHP)_ii²) of the remainder — all from the same
products. For deflated measurements a dotted line adds what plain Hutchinson's would have
been at the same M (from the unbiased ‖∇²L‖_F² and Σ diag²): the gap is the deflation's
gain. Right: the relative error of the M-probe mean, ``stderr/|tr∇²L|``, and its prediction
(the left one divided by √M; M may vary by checkpoint under a CI target). Lines are means
over seeds, bars ± s.e.m.; one line per λ (colour) and update rule (line style and marker:
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
from villani.io.results import is_doubly_stochastic, measurements
from villani.statistics.samples import predicted_cv

PAPER_CLAIM = 0.049


def _predicted(frob, diag, mean, M) -> float:
    if not np.isfinite(frob):
        return np.nan
    p = predicted_cv(max(float(frob), 0.0), mean, int(M), None if not np.isfinite(diag) else max(float(diag), 0.0))
    return np.nan if p is None else p


def cv_table(m: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint: measured and predicted CV (per sample and of the M-probe mean) of the
    estimator used, and plain Hutchinson's predicted CV at the same M."""
    cols = ["variant", "lam", "seed", "step", "trace_L_mean", "trace_L_stderr", "trace_L_frob_sq", "trace_L_diag_sq",
            "trace_L_num_probes", "trace_L_deflation_rank", "trace_L_remainder_frob_sq", "trace_L_remainder_diag_sq",
            "lam_d"]
    m = m[~m["trace_L_estimator"].map(is_doubly_stochastic)]  # group means, and no ‖∇²L‖_F²
    out = m.reindex(columns=cols).copy()
    M = out["trace_L_num_probes"].to_numpy(float)
    mean = out["trace_L_mean"].abs().to_numpy(float)
    out["cv_mean_measured"] = out["trace_L_stderr"] / mean
    out["cv_sample_measured"] = out["cv_mean_measured"] * np.sqrt(M)
    plain, pred = [], []
    for r in out.itertuples():
        plain.append(_predicted(r.trace_L_frob_sq, r.trace_L_diag_sq, r.trace_L_mean, r.trace_L_num_probes))
        pred.append(_predicted(r.trace_L_remainder_frob_sq, r.trace_L_remainder_diag_sq, r.trace_L_mean,
                               r.trace_L_num_probes) if r.trace_L_deflation_rank > 0 else plain[-1])
    out["cv_mean_predicted"] = pred
    out["cv_sample_predicted"] = out["cv_mean_predicted"] * np.sqrt(M)
    out["cv_mean_predicted_plain"] = plain
    out["cv_sample_predicted_plain"] = out["cv_mean_predicted_plain"] * np.sqrt(M)
    out["prediction"] = np.where(out["trace_L_deflation_rank"] > 0, "deflated remainder (Rademacher)",
                                 np.where(out["trace_L_diag_sq"].notna(), "exact (Rademacher)", "bound 2‖H‖_F²"))
    out["cv_mean_measured_F"] = out["trace_L_stderr"] / (out["trace_L_mean"] + out["lam_d"]).abs()
    return out


def _sem(x) -> float:
    return float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    t = cv_table(measurements(params, root, variants=None))
    fig, axes = plt.subplots(1, 2, figsize=(DOUBLE, 3.4))
    deflated = bool((t["trace_L_deflation_rank"] > 0).any())
    sample = "tr(QᵀHQ) + (Pv)ᵀ∇²L(Pv)" if deflated else "vᵀ∇²L v"
    cols = [("cv_sample_measured", "cv_sample_predicted", "cv_sample_predicted_plain", "per-sample CV"),
            ("cv_mean_measured", "cv_mean_predicted", "cv_mean_predicted_plain", "relative error, stderr/|tr∇²L|")]
    for ax, (meas, pred, plain, ylabel) in zip(axes, cols):
        for (variant, lam), d in t.groupby(["variant", "lam"], sort=False):
            g = d.groupby("step")
            c, st = lam_color(lam), variant_style(variant)
            ax.errorbar(g[meas].mean().index, 100 * g[meas].mean(), yerr=100 * g[meas].agg(_sem), color=c,
                        marker=st["marker"], ls=st["ls"], ms=3.5, lw=1.1,
                        label=f"{run_label(variant, lam)}: measured" if ax is axes[0] else None)
            ax.plot(g[pred].mean().index, 100 * g[pred].mean(), color=c, ls=st["ls"], lw=0.7, alpha=0.6)
            if deflated:
                ax.plot(g[plain].mean().index, 100 * g[plain].mean(), color=c, ls=":", lw=0.7, alpha=0.8)
        ax.set(xlabel="optimizer step (checkpoint)", ylabel=f"{ylabel} (%)")
        ax.set_yscale("log")
    m_lo, m_hi = int(t["trace_L_num_probes"].min()), int(t["trace_L_num_probes"].max())
    axes[1].axhline(100 * PAPER_CLAIM, color="0.5", ls=":", lw=1.0)
    axes[0].set_title("spread of one " + ("deflated " if deflated else "")
                      + f"Hutchinson sample\nstd({sample})/|tr∇²L|")
    axes[1].set_title(f"error of the M = {m_hi} probe estimate" if m_lo == m_hi
                      else f"error of the M = {m_lo}–{m_hi} probe estimate")
    for ax in axes:
        plain_log_ticks(ax)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="0.4", lw=0.7, alpha=0.6))
    labels.append("thin line: predicted" + (" (deflated remainder)" if deflated else " from ‖∇²L‖_F²")
                  + " (same colour and style)")
    if deflated:
        handles.append(plt.Line2D([], [], color="0.4", ls=":", lw=0.7))
        labels.append("dotted: plain Hutchinson at the same M, predicted")
    handles.append(plt.Line2D([], [], color="0.5", ls=":", lw=1.0))
    labels.append("grey dotted: paper's claim √(2d/M) ≈ 4.9%")
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    fig.suptitle(wrap(f"{params['data']['name']}: coefficient of variation of the Hutchinson estimate of tr ∇²L, "
                      "measured and predicted (SPEC §5)", DOUBLE))
    return save(fig, t, params, root, name)
