"""Fig 5 (training part): training loss and ‖θ‖² vs step, mean ± s.e.m. over seeds.

Per-step losses are smoothed with a centred moving average of ``max(1, T/40)`` steps before
averaging over seeds; the shaded band is ±1 s.e.m. across seeds (s.e.m. = sd/√n, n seeds).
Noise-injection runs (variant ``noise``) are dashed.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import lam_colors, lam_label
from villani.runs import runs, training_log


def curves(params: Mapping, root) -> pd.DataFrame:
    """Long table: variant, lam, step, loss_mean, loss_sem, theta_sq_mean, theta_sq_sem, n_seeds."""
    window = max(1, int(params["train"]["steps"]) // 40)
    per_run = []
    for r in runs(params):
        log = training_log(params, r, root)
        log = log.assign(loss_smooth=log["loss"].rolling(window, center=True, min_periods=1).mean(),
                         variant=r.variant, lam=r.lam, seed=r.seed)
        per_run.append(log)
    df = pd.concat(per_run, ignore_index=True)

    def sem(x):
        return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0

    g = df.groupby(["variant", "lam", "step"])
    out = pd.DataFrame({
        "loss_mean": g["loss_smooth"].mean(), "loss_sem": g["loss_smooth"].agg(sem),
        "theta_sq_mean": g["theta_sq_norm"].mean(), "theta_sq_sem": g["theta_sq_norm"].agg(sem),
        "n_seeds": g["seed"].nunique(),
    }).reset_index()
    return out


def draw_curves(ax_loss, ax_theta, data: pd.DataFrame) -> None:
    colors = lam_colors(data["lam"].unique())
    for (variant, lam), d in data.groupby(["variant", "lam"]):
        style = "--" if variant == "noise" else "-"
        label = lam_label(lam) + (" + noise injection" if variant == "noise" else "")
        for ax, col in ((ax_loss, "loss"), (ax_theta, "theta_sq")):
            if ax is None:
                continue
            m, s = d[f"{col}_mean"].to_numpy(), d[f"{col}_sem"].to_numpy()
            ax.plot(d["step"], m, style, color=colors[float(lam)], label=label, lw=1.4)
            ax.fill_between(d["step"], m - s, m + s, color=colors[float(lam)], alpha=0.2, lw=0)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    data = curves(params, root)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    draw_curves(a1, a2, data)
    n = int(data["n_seeds"].max())
    a1.set(xlabel="optimizer step", ylabel="training loss L (nats/token)",
           title=f"Training loss, mean ± s.e.m. over {n} seed(s)")
    a2.set(xlabel="optimizer step", ylabel="‖θ‖²", yscale="log", title="Parameter norm")
    a1.legend()
    fig.suptitle(f"{params['data']['name']}: training across weight decay λ", y=1.02)
    return save(fig, data, params, root, name)
