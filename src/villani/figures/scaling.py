"""Fig 10: the C_LS bound vs model dimension, and the measured cost of one HVP vs model size.

Left: C_LS(F) ≤ (s/λ)(1 + d/(λs)) (:func:`villani.bounds.c_ls_upper`) for d from 1e8 to
1e12 (extended down to the measured model's d), one line per λ > 0 of ``train.lambdas``,
log–log; vertical lines mark the measured model and GPT-Neo-125M / 1B. λ = 0 has no bound.
Middle and right: seconds per Hessian-vector product (and per gradient) and peak memory of
one HVP, measured on the model-size sweep ``results/cost/hvp_cost.csv`` (``villani cost``,
hidden sizes ``figures.model_sizes``), fitted by a power law in d (log–log least squares)
and extrapolated to d = 1.25e8 and 1e9 (open markers). The extrapolation scales the
sweep's architecture (layers, sequence length, batch) by width only: an order-of-magnitude
guide, not a prediction for GPT-Neo-125M's 12 layers and 2048 tokens.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds import c_ls_upper
from villani.figures.style import fmt_num, lam_color, lam_label, note
from villani.readers import cost_table, measurements
from villani.stats import fit_slope

TARGETS = {"GPT-Neo-125M": 1.25e8, "1B": 1e9}


def power_fit(d: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(exponent, prefactor) of y ≈ prefactor · d^exponent, or None with < 2 usable points."""
    ok = np.isfinite(d) & np.isfinite(y) & (d > 0) & (y > 0)
    if ok.sum() < 2 or np.ptp(d[ok]) == 0:
        return None
    fit = fit_slope(d[ok], y[ok], space="loglog")
    return fit.slope, 10.0 ** fit.intercept


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    s = float(params["measure"]["s_values"][0])
    m = measurements(params, root)
    d_model = float(m["d"].iloc[0])
    cost = cost_table(root)
    lams = [float(x) for x in params["train"]["lambdas"] if float(x) > 0]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.4))
    rows = []

    d_grid = np.geomspace(min(1e8, d_model / 2), 1e12, 120)
    for lam in lams:
        c = c_ls_upper(lam, d_grid, s)
        a1.plot(d_grid, c, color=lam_color(lam), lw=1.6, label=lam_label(lam))
        a1.scatter([d_model], [c_ls_upper(lam, d_model, s)], color=lam_color(lam), zorder=3, s=25)
        rows += [{"series": "c_ls_bound", "lam": lam, "d": x, "value": y} for x, y in zip(d_grid, c)]
    a1.axvline(d_model, color="0.4", lw=0.8, ls=":")
    a1.text(d_model, 0.55, " measured model", rotation=90, va="bottom", fontsize=7,
            transform=a1.get_xaxis_transform())
    for label, dv in TARGETS.items():
        a1.axvline(dv, color="0.7", lw=0.8, ls="--")
        a1.text(dv, 0.55, f" {label}", rotation=90, va="bottom", fontsize=7, transform=a1.get_xaxis_transform())
    a1.set(xscale="log", yscale="log", xlabel="model dimension d (parameters)",
           ylabel=f"C_LS(F) upper bound  (s/λ)(1 + d/(λs)), s = {s:g}", title="Log-Sobolev constant bound vs d")
    a1.legend(title="λ = 0: undefined" if 0.0 in [float(x) for x in params["train"]["lambdas"]] else None)

    d = cost["d"].to_numpy(float)
    d_ext = np.geomspace(d.min(), max(TARGETS.values()) * 1.3, 80)
    for ax, cols, unit, scale in ((a2, [("seconds_hvp", "HVP"), ("seconds_grad", "gradient")], "seconds", 1.0),
                                  (a3, [("peak_memory_bytes", "HVP peak memory")], "GiB", 2.0**30)):
        for k, (col, label) in enumerate(cols):
            if col not in cost:
                continue
            y = cost[col].to_numpy(float) / scale
            color = f"C{k}"
            ax.scatter(d, y, color=color, zorder=3, label=f"{label} (measured)")
            rows += [{"series": f"{col}_measured", "d": x, "value": v, "hidden_size": h}
                     for x, v, h in zip(d, y, cost["hidden_size"])]
            fit = power_fit(d, y)
            if fit is None:
                continue
            expo, pre = fit
            ax.plot(d_ext, pre * d_ext**expo, color=color, ls="--", lw=1,
                    label=f"{label}: fit ∝ d^{expo:.2f}")
            for tl, tv in TARGETS.items():
                yv = pre * tv**expo
                ax.scatter([tv], [yv], facecolors="none", edgecolors=color, s=50, zorder=3)
                ax.annotate(f"{tl}: {fmt_num(yv, 2)} {unit}", (tv, yv), textcoords="offset points",
                            xytext=(-7, 5) if k == 0 else (7, -11), ha="right" if k == 0 else "left",
                            fontsize=7, color=color)
                rows.append({"series": f"{col}_extrapolated", "d": tv, "value": yv, "exponent": expo,
                             "prefactor": pre})
        ax.set(xscale="log", yscale="log", xlabel="model dimension d (parameters)")
        title = f"measured as: {cost['memory_source'].iloc[0]}" if ax is a3 and "memory_source" in cost else None
        ax.legend(fontsize=7, loc="upper left", title=title, title_fontsize=7)
    device = str(cost["device"].iloc[0]) if "device" in cost else "?"
    a2.set(ylabel="seconds per product", title=f"Cost of one HVP and one gradient ({device})")
    a3.set(ylabel="peak memory (GiB)", title=f"Peak memory of one HVP ({device})")
    tokens = int(cost["tokens"].iloc[0]) if "tokens" in cost else None
    if tokens:
        note(a2, f"{tokens} tokens per product,\nwidth sweep {', '.join(map(str, cost['hidden_size']))}",
             loc="lower right")
    fig.suptitle(f"{params['data']['name']}: scaling of the bound and of curvature measurement", y=1.02)
    fig.tight_layout()
    return save(fig, pd.DataFrame(rows), params, root, name)
