"""Fig 5: training curves, and the measured gap F(θ_t) − F* against the eq. (41) envelope.

Left: training loss vs step, mean ± s.e.m. over seeds. Per-step losses are smoothed with
a centred moving average of ``max(1, T/40)`` steps before averaging over seeds; the band
is ±1 s.e.m. across seeds (sd/√n, n seeds). Noise-injection runs (variant ``noise``) are
dashed. Middle: ‖θ‖² vs step. Right (λ > 0): the measured F(θ_t) − F* at the checkpoints
(F on the measurement set, F* the smallest F of the run — ``villani.bounds.table.run_bounds``)
and the envelope of eq. (41) with β = 1/λ from :func:`villani.bounds.envelope`, as printed
(``form="paper"``, solid) and as eqs. (38)+(40) give it (``form="consistent"``, dotted),
with each run's C_LS(F), η, L and σ² from ``bounds.json``, averaged over seeds. The printed
form is not a valid bound (docs/bounds.md): at T = 0 it is λ(F₀ − F*) + ηLσ²/4, below
the true gap; the figure shows it.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds.theory import envelope
from villani.figures.style import lam_color, lam_label, note
from villani.io.results import bounds_frame, training_log
from villani.plan.runs import runs


def _sem(x) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


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
    g = df.groupby(["variant", "lam", "step"])
    out = pd.DataFrame({
        "loss_mean": g["loss_smooth"].mean(), "loss_sem": g["loss_smooth"].agg(_sem),
        "theta_sq_mean": g["theta_sq_norm"].mean(), "theta_sq_sem": g["theta_sq_norm"].agg(_sem),
        "n_seeds": g["seed"].nunique(),
    }).reset_index()
    return out


def envelopes(params: Mapping, root, num: int = 121) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured, envelope): the checkpoint gaps F − F* (mean ± s.e.m. over seeds) and both
    envelope forms on a step grid (mean over seeds), for every λ > 0."""
    b = bounds_frame(params, root)
    b = b[b["status"] == "ok"].copy()
    if b.empty:
        empty = pd.DataFrame(columns=["lam", "step"])
        return empty, empty
    b["gap"] = b["F"] - b["f_star"]
    g = b.groupby(["lam", "step"])["gap"]
    measured = pd.DataFrame({"gap_mean": g.mean(), "gap_sem": g.agg(_sem), "n_seeds": g.size()}).reset_index()
    grid = np.linspace(0.0, float(params["train"]["steps"]), num)
    env_rows = []
    for (lam, seed), r in b.groupby(["lam", "seed"]):
        r0 = r.iloc[0]
        args = (float(r0["f0"]) - float(r0["f_star"]), float(r0["c_ls"]), float(r0["eta"]),
                float(r0["smoothness_L"]), float(r0["sigma_sq"]), float(lam))
        paper = envelope(grid, *args, form="paper")
        consistent = envelope(grid, *args, form="consistent")
        env_rows += [{"lam": lam, "seed": seed, "step": s, "envelope_paper": p, "envelope_consistent": c}
                     for s, p, c in zip(grid, paper, consistent)]
    env = pd.DataFrame(env_rows).groupby(["lam", "step"])[["envelope_paper", "envelope_consistent"]].mean()
    return measured, env.reset_index()


def draw_curves(ax_loss, ax_theta, data: pd.DataFrame) -> None:
    for (variant, lam), d in data.groupby(["variant", "lam"]):
        style = "--" if variant == "noise" else "-"
        label = lam_label(lam) + (" + noise injection" if variant == "noise" else "")
        for ax, col in ((ax_loss, "loss"), (ax_theta, "theta_sq")):
            if ax is None:
                continue
            m, s = d[f"{col}_mean"].to_numpy(), d[f"{col}_sem"].to_numpy()
            ax.plot(d["step"], m, style, color=lam_color(lam), label=label, lw=1.4)
            ax.fill_between(d["step"], m - s, m + s, color=lam_color(lam), alpha=0.2, lw=0)


def draw_envelope(ax, measured: pd.DataFrame, env: pd.DataFrame) -> None:
    """Measured gaps (points) and both envelope forms (lines) per λ, on a symlog y axis
    (gaps of exactly 0 — the checkpoint at F* — stay visible)."""
    handles = []
    for lam, m in measured.groupby("lam"):
        c = lam_color(lam)
        handles.append(ax.errorbar(m["step"], m["gap_mean"], yerr=m["gap_sem"], fmt="o", ms=4, color=c, capsize=2,
                                   label=f"{lam_label(lam)}: measured F(θ_t) − F*"))
        e = env[env["lam"] == lam]
        handles += ax.plot(e["step"], e["envelope_paper"], "-", color=c, lw=1.2, label="   eq. (41) as printed")
        handles += ax.plot(e["step"], e["envelope_consistent"], ":", color=c, lw=1.6, label="   eqs. (38)+(40)")
    values = np.concatenate([measured["gap_mean"], env["envelope_paper"], env["envelope_consistent"]])
    pos = values[np.isfinite(values) & (values > 0)]
    if pos.size:
        ax.set_yscale("symlog", linthresh=10.0 ** np.floor(np.log10(pos.min())))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    data = curves(params, root)
    measured, env = envelopes(params, root)
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15.5, 4.2))
    draw_curves(a1, a2, data)
    n = int(data["n_seeds"].max())
    a1.set(xlabel="optimizer step", ylabel="training loss L (nats/token)",
           title=f"Training loss, mean ± s.e.m. over {n} seed(s)")
    a2.set(xlabel="optimizer step", ylabel="‖θ‖² (squared L2 norm)", title="Parameter norm")
    a1.legend()
    if measured.empty:
        note(a3, "no λ > 0: eq. (41) is undefined for λ = 0", loc="upper right")
    else:
        draw_envelope(a3, measured, env)
    a3.set(xlabel="optimizer step", ylabel="F(θ_t) − F* (nats/token)",
           title="F(θ_t) − F* vs the eq. (41) envelope (β = 1/λ)\n"
                 "as printed it is not a bound: at step 0 it lies below F₀ − F*")
    fig.suptitle(f"{params['data']['name']}: training across weight decay λ", y=1.02)
    fig.tight_layout()
    table = pd.concat([
        data.assign(series="training"),
        measured.assign(series="measured_gap", variant="adamw"),
        env.assign(series="envelope", variant="adamw"),
    ], ignore_index=True)
    return save(fig, table, params, root, name)
