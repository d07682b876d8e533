"""Fig 10: the C_LS bound vs model dimension, and the measured cost of one HVP vs model size.

Left: C_LS(F) ≤ (s/λ)(1 + d/(λs)) (:func:`villani.bounds.c_ls_upper`) for d from 1e8 to
1e12 (extended down to the measured model's d), one line per λ > 0 of ``train.lambdas``,
log–log; vertical lines mark the measured model and GPT-Neo-125M / 1B. λ = 0 has no bound.
Middle and right: seconds per Hessian-vector product (and per gradient) and peak memory of
one HVP, measured on the model-size sweep ``results/cost/{dataset}/hvp_cost.csv`` (``villani cost``,
hidden sizes ``figures.model_sizes``), fitted by cost = a + b·d with a, b ≥ 0
(:func:`villani.statistics.samples.fit_cost_model`: per-call overhead plus a per-parameter cost, the
asymptotically linear growth at fixed tokens) and extrapolated to d = 1.25e8 and 1e9 (open
markers). The memory panel also draws the floor 16 bytes per parameter (θ, ∇F, v and Hv
in fp32) that no extrapolation may undercut — a power law fitted to tiny models, where the
overhead a dominates, does (exponent ≈ 0.45). The extrapolation scales the sweep's
architecture (layers, sequence length, batch) by width only, where activations grow ∝ h
but d ∝ h²: an order-of-magnitude guide (memory errs high), not a prediction for
GPT-Neo-125M's 12 layers and 2048 tokens.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds.theory import c_ls_upper
from villani.figures.style import DOUBLE, fmt_num, lam_color, lam_label, wrap
from villani.io.results import cost_table, measurements
from villani.statistics.samples import fit_cost_model

TARGETS = {"125M": 1.25e8, "1B": 1e9}  # GPT-Neo-125M and a 1B-parameter model


FP32_FLOOR_BYTES_PER_PARAM = 16  # θ, ∇F (kept for the double backward), v, Hv


def cost_fit(d: np.ndarray, y: np.ndarray):
    """:func:`fit_cost_model` of y on d, or None with < 2 usable points."""
    try:
        return fit_cost_model(d, y)
    except ValueError:
        return None


def fit_label(label: str, fit, unit: str) -> str:
    """Legend text of a fit: a + b·d with b per million parameters (seconds) or per parameter (bytes)."""
    if unit == "GiB":
        return f"{label}: fit {fmt_num(fit.fixed / 2**20, 2)} MiB + {fmt_num(fit.per_unit, 3)} B/param"
    return f"{label}: fit {fmt_num(fit.fixed, 2)} s + {fmt_num(fit.per_unit * 1e6, 2)} s per 1M params"


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    s = params.measure.s_values[0]
    m = measurements(params, root)
    d_model = float(m["d"].iloc[0])
    cost = cost_table(params, root)
    lams = [x for x in params.train.lambdas if x > 0]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(DOUBLE, 3.9))
    rows = []

    d_grid = np.geomspace(min(1e8, d_model / 2), 1e12, 120)
    for lam in lams:
        c = c_ls_upper(lam, d_grid, s)
        a1.plot(d_grid, c, color=lam_color(lam), lw=1.4, label=f"C_LS bound, {lam_label(lam)}")
        a1.scatter([d_model], [c_ls_upper(lam, d_model, s)], color=lam_color(lam), zorder=3, s=25)
        rows += [{"series": "c_ls_bound", "lam": lam, "d": x, "value": y} for x, y in zip(d_grid, c)]
    a1.axvline(d_model, color="0.4", lw=0.8, ls=":")
    a1.text(d_model, 0.98, " ours", rotation=90, va="top", fontsize=7, transform=a1.get_xaxis_transform())
    for label, dv in TARGETS.items():
        a1.axvline(dv, color="0.7", lw=0.8, ls="--")
        a1.text(dv, 0.98, f" {label}", rotation=90, va="top", fontsize=7, transform=a1.get_xaxis_transform())
    a1.set(xscale="log", yscale="log", xlabel="model dimension d",
           ylabel=f"C_LS(F) ≤ (s/λ)(1 + d/(λs)), s = {s:g}",
           title="log-Sobolev bound" + (" (λ = 0: undefined)" if 0.0 in params.train.lambdas else ""))

    d = cost["d"].to_numpy(float)
    d_ext = np.geomspace(d.min(), max(TARGETS.values()) * 1.3, 80)
    for ax, cols, unit, scale in ((a2, [("seconds_hvp", "HVP", "seconds_hvp"), ("seconds_grad", "gradient", "seconds_grad")],
                                   "seconds", 1.0),
                                  (a3, [("peak_memory_bytes", "HVP peak memory", "peak_memory_gib")], "GiB", 2.0**30)):
        for k, (col, label, series) in enumerate(cols):
            if col not in cost:
                continue
            y_raw = cost[col].to_numpy(float)
            y = y_raw / scale
            color = f"C{k}"
            ax.scatter(d, y, color=color, zorder=3, label=f"{label} (measured)")
            rows += [{"series": f"{series}_measured", "d": x, "value": v, "hidden_size": h}
                     for x, v, h in zip(d, y, cost["hidden_size"])]
            fit = cost_fit(d, y_raw)
            if fit is None:
                continue
            ax.plot(d_ext, fit(d_ext) / scale, color=color, ls="--", lw=1, label=fit_label(label, fit, unit))
            for tl, tv in TARGETS.items():
                yv = float(fit(tv)) / scale
                ax.scatter([tv], [yv], facecolors="none", edgecolors=color, s=50, zorder=3)
                ax.annotate(f"{tl}: {fmt_num(yv, 2)}{' s' if unit == 'seconds' else ' GiB'}", (tv, yv),
                            textcoords="offset points", xytext=(-5, 4) if k == 0 else (-5, -10), ha="right",
                            fontsize=7, color=color)
                rows.append({"series": f"{series}_extrapolated", "d": tv, "value": yv, "fixed": fit.fixed,
                             "per_unit": fit.per_unit, "max_rel_residual": fit.max_rel_residual})
        if unit == "GiB":
            floor = FP32_FLOOR_BYTES_PER_PARAM * d_ext / scale
            ax.plot(d_ext, floor, color="0.5", ls=":", lw=1,
                    label=f"memory floor {FP32_FLOOR_BYTES_PER_PARAM} B/param (θ, ∇F, v, Hv in fp32)")
            rows += [{"series": "peak_memory_gib_floor", "d": tv, "value": FP32_FLOOR_BYTES_PER_PARAM * tv / scale}
                     for tv in TARGETS.values()]
        ax.set(xscale="log", yscale="log", xlabel="model dimension d")
    device = str(cost["device"].iloc[0]) if "device" in cost else "?"
    a2.set(ylabel="seconds per product", title=f"one HVP, one gradient ({device})")
    a3.set(ylabel="peak memory (GiB)", title=f"peak memory, one HVP ({device})")
    handles, labels = [], []
    for ax in (a1, a2, a3):
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    tokens = int(cost["tokens"].iloc[0]) if "tokens" in cost else None
    source = f"; memory measured as {cost['memory_source'].iloc[0]}" if "memory_source" in cost else ""
    sweep = (f"; {tokens} tokens per product, widths {', '.join(map(str, cost['hidden_size']))}" if tokens else "")
    fig.suptitle(wrap(f"{params['data']['name']}: scaling of the bound and of curvature measurement{sweep}{source}",
                      DOUBLE))
    return save(fig, pd.DataFrame(rows), params, root, name)
