"""Fig 7: the Villani diagnostic Ψ_s vs validation perplexity across checkpoints.

One point per checkpoint and seed; colour = λ, marker area grows with the step; thin lines
join each run's checkpoints in step order. R² per λ is the squared correlation of Ψ_s and
validation perplexity over that λ's checkpoints (all seeds), from
:func:`villani.stats.fit_slope`. Ψ_s = −(tr∇²L + λd) + ‖∇F‖²/s at the primary s.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import (
    fmt_num,
    lam_color,
    lam_label,
    plain_log_ticks,
    value_axis,
)
from villani.io.results import measurements
from villani.psi import psi_column
from villani.stats import fit_slope


def r2_per_lam(m: pd.DataFrame, col: str) -> dict[float, float | None]:
    out = {}
    for lam, d in m.groupby("lam"):
        x, y = d[col].to_numpy(float), d["val_ppl"].to_numpy(float)
        ok = np.isfinite(x) & np.isfinite(y)
        out[float(lam)] = (fit_slope(x[ok], y[ok]).r2
                           if ok.sum() >= 2 and np.ptp(x[ok]) > 0 else None)
    return out


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    m = measurements(params, root)
    s = float(params["measure"]["s_values"][0])
    col = psi_column(s)
    r2 = r2_per_lam(m, col)
    steps = m["step"].to_numpy(float)
    size = 14 + 110 * (steps - steps.min()) / max(np.ptp(steps), 1.0)
    fig, ax = plt.subplots(figsize=(7.2, 5.2))
    for lam, d in m.groupby("lam"):
        c = lam_color(lam)
        for _, r in d.groupby("seed"):
            r = r.sort_values("step")
            ax.plot(r[col], r["val_ppl"], color=c, lw=0.7, alpha=0.5)
        ax.scatter(d[col], d["val_ppl"], s=size[d.index], color=c, alpha=0.85, edgecolors="white", lw=0.5,
                   label=f"{lam_label(lam)}: R² = {fmt_num(r2[float(lam)])}")
    for st in (int(steps.min()), int(steps.max())):
        ax.scatter([], [], s=14 + 110 * (st - steps.min()) / max(np.ptp(steps), 1.0), color="0.6",
                   label=f"step {st}")
    value_axis(ax, m["val_ppl"], decades=0.7)
    value_axis(ax, m[col], axis="x")
    plain_log_ticks(ax)
    ax.set(xlabel=f"Ψ_s (s = {s:g}) = −ΔF + ‖∇F‖²/s", ylabel="validation perplexity",
           title=f"{params['data']['name']}: Villani diagnostic vs generalisation")
    ax.legend(fontsize=7)
    fig.tight_layout()
    table = m[["lam", "seed", "step", col, "val_ppl", "val_loss", "laplacian_F", "grad_F_sq_norm"]].copy()
    table["r2_lam"] = table["lam"].map(lambda x: r2[float(x)])
    return save(fig, table, params, root, name)
