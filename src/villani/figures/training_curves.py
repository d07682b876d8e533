"""Fig 5: training curves of every update rule, and F(θ_t) − F* against the eq. (41)
envelope where its hypotheses hold.

Left: training loss vs step, mean ± s.e.m. over seeds, per λ (colour) and update rule
(line style: AdamW, Adam on F, Langevin SGD on F = eq. 36, noisy AdamW, sweep arms).
Per-step losses are smoothed with a centred moving average of ``max(1, T/40)`` steps
before averaging over seeds; the band is ±1 s.e.m. across seeds (sd/√n). Middle: ‖θ‖²
vs step. Right: F(θ_t) − F* at the checkpoints (F on the measurement set, F* = 0 — a
lower bound of min F, ``villani.bounds.table``), mean ± s.e.m. over seeds, on a log
axis, for every run with λ > 0 — whether the optimizer minimises F at all is visible
here (AdamW's decoupled decay need not). Where Theorem 2's hypotheses hold for a run
(update rule eq. 36, η ≤ min(1, λ/(4σ²)), λ > 0) the eq. (41) envelope with β = 1/λ is
drawn over the run, as printed (solid) and as eqs. (38)+(40) give it (dotted), averaged
over seeds; checkpoints where a hypothesis of the envelope fails (F above F(θ₀)) are
hollow. No envelope is drawn for a run whose hypotheses fail: the legend says why. The
title states what the data show: for how many checkpoints the envelope holds, and which
runs' F rises.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds.theory import F_STAR_LOWER, envelope
from villani.figures.style import DOUBLE, lam_color, run_label, variant_label, variant_style, wrap
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
    g = df.groupby(["variant", "lam", "step"], sort=False)
    out = pd.DataFrame({
        "loss_mean": g["loss_smooth"].mean(), "loss_sem": g["loss_smooth"].agg(_sem),
        "theta_sq_mean": g["theta_sq_norm"].mean(), "theta_sq_sem": g["theta_sq_norm"].agg(_sem),
        "n_seeds": g["seed"].nunique(),
    }).reset_index()
    return out


def envelopes(params: Mapping, root, num: int = 121) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured, envelope): per (variant, λ > 0) and checkpoint the gap F − F* (mean ± s.e.m.
    over seeds, and how many seeds meet the envelope's hypotheses there); both envelope
    forms on a step grid (mean over seeds) for the runs whose Theorem 2 hypotheses hold."""
    b = bounds_frame(params, root)
    b = b[b["status"] == "ok"].copy()
    if b.empty:
        empty = pd.DataFrame(columns=["variant", "lam", "step"])
        return empty, empty
    b["gap"] = b["F"] - F_STAR_LOWER
    b["applicable"] = b["envelope_status"] == "ok"
    g = b.groupby(["variant", "lam", "step"], sort=False)
    measured = pd.DataFrame({"gap_mean": g["gap"].mean(), "gap_sem": g["gap"].agg(_sem), "n_seeds": g.size(),
                             "n_applicable": g["applicable"].sum(),
                             "n_holds": g["envelope_check"].agg(lambda c: int((c == "holds").sum())),
                             "status": g["envelope_status"].first()}).reset_index()
    grid = np.linspace(0.0, float(params["train"]["steps"]), num)
    env_rows = []
    for (variant, lam, seed), r in b.groupby(["variant", "lam", "seed"], sort=False):
        r0 = r.iloc[0]
        if r0["theorem2_status"] != "ok":
            continue
        args = (float(r0["f0"]) - F_STAR_LOWER, float(r0["c_ls"]), float(r0["eta"]),
                float(r0["smoothness_L"]), float(r0["sigma_sq"]), float(lam))
        paper = envelope(grid, *args, form="paper")
        consistent = envelope(grid, *args, form="consistent")
        env_rows += [{"variant": variant, "lam": lam, "seed": seed, "step": s, "envelope_paper": p,
                      "envelope_consistent": c} for s, p, c in zip(grid, paper, consistent)]
    if not env_rows:
        return measured, pd.DataFrame(columns=["variant", "lam", "step", "envelope_paper", "envelope_consistent"])
    env = pd.DataFrame(env_rows).groupby(["variant", "lam", "step"], sort=False)[
        ["envelope_paper", "envelope_consistent"]].mean()
    return measured, env.reset_index()


def draw_curves(ax_loss, ax_theta, data: pd.DataFrame) -> None:
    """Loss (and ‖θ‖², unless ``ax_theta`` is None) of :func:`curves`, mean ± s.e.m. per run
    group: colour = λ, line style = update rule; the loss lines carry :func:`run_label`."""
    for (variant, lam), d in data.groupby(["variant", "lam"], sort=False):
        st = variant_style(variant)
        for ax, col in ((ax_loss, "loss"), (ax_theta, "theta_sq")):
            if ax is None:
                continue
            m, s = d[f"{col}_mean"].to_numpy(), d[f"{col}_sem"].to_numpy()
            ax.plot(d["step"], m, ls=st["ls"], color=lam_color(lam), lw=1.1,
                    label=run_label(variant, lam) if ax is ax_loss else None)
            ax.fill_between(d["step"], m - s, m + s, color=lam_color(lam), alpha=0.2, lw=0)


def _reason(status: str) -> str:
    return status.removeprefix("n/a: ").split(";")[0]


def draw_envelope(ax, measured: pd.DataFrame, env: pd.DataFrame) -> list[str]:
    """Measured gaps per (variant, λ) and, where drawn, both envelope forms; returns the legend
    notes of the runs without an envelope, one per reason."""
    notes: dict[str, list[str]] = {}
    for (variant, lam), m in measured.groupby(["variant", "lam"], sort=False):
        c, st = lam_color(lam), variant_style(variant)
        full = m["n_applicable"] == m["n_seeds"]
        ax.errorbar(m["step"], m["gap_mean"], yerr=m["gap_sem"], fmt=st["marker"], ls="none", ms=3.5, color=c,
                    mfc="none")
        ax.plot(m["step"][full], m["gap_mean"][full], st["marker"], ls="none", ms=3.5, color=c)
        e = env[(env["variant"] == variant) & (env["lam"] == lam)]
        if len(e):
            ax.plot(e["step"], e["envelope_paper"], "-", color=c, lw=1.0)
            ax.plot(e["step"], e["envelope_consistent"], ":", color=c, lw=1.3)
        else:
            reason = _reason(str(m["status"].iloc[-1]))
            reason = "update rule not eq. (36)" if reason.startswith("update rule") else reason
            notes.setdefault(reason, []).append(f"{variant_label(variant)} {lam_label_short(lam)}")
    ax.set_yscale("log")
    return [f"no envelope for {', '.join(runs_)}: {reason}" for reason, runs_ in notes.items()]


def lam_label_short(lam: float) -> str:
    return f"λ = {float(lam):g}"


def title_from_data(measured: pd.DataFrame) -> str:
    """What the right panel shows, counted: where the envelope holds, and which runs' F rises."""
    parts = []
    app = measured[measured["n_applicable"] > 0]
    if len(app):
        n, k = int(app["n_applicable"].sum()), int(app["n_holds"].sum())
        who = ", ".join(sorted({f"{variant_label(v)} λ = {lam:g}" for v, lam in zip(app["variant"], app["lam"])}))
        parts.append(f"eq. (41) as printed holds at {k} of {n} checkpoints where its hypotheses hold ({who})")
    else:
        parts.append("eq. (41)'s hypotheses hold at no checkpoint")
    rising = []
    for (variant, lam), m in measured.groupby(["variant", "lam"], sort=False):
        m = m.sort_values("step")
        if float(m["gap_mean"].iloc[-1]) > float(m["gap_mean"].iloc[0]):
            rising.append(f"{variant_label(variant)} λ = {lam:g}: {m['gap_mean'].iloc[0]:.3g} → "
                          f"{m['gap_mean'].iloc[-1]:.3g}")
    parts.append("F rises under " + "; ".join(rising) if rising else "F decreases in every run")
    return "; ".join(parts)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    data = curves(params, root)
    measured, env = envelopes(params, root)
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(DOUBLE, 3.6))
    draw_curves(a1, a2, data)
    n = int(data["n_seeds"].max())
    a1.set(xlabel="optimizer step", ylabel="training loss (nats/token)", title=f"training loss\n±1 s.e.m. over {n} seeds")
    a2.set(xlabel="optimizer step", ylabel="‖θ‖²", title="parameter norm\n")
    a2.set_yscale("log")
    notes = []
    if measured.empty:
        a3.text(0.5, 0.5, "no λ > 0:\neq. (41) is undefined for λ = 0", transform=a3.transAxes, ha="center",
                va="center")
    else:
        notes = draw_envelope(a3, measured, env)
    a3.set(xlabel="optimizer step", ylabel="F(θ_t) − F*, F* = 0 (nats/token)",
           title="F at the checkpoints\nand its envelopes")
    handles, labels = a1.get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="0.3", marker="o", ls="none", mfc="none", ms=3.5),
                plt.Line2D([], [], color="0.3", lw=1.0), plt.Line2D([], [], color="0.3", ls=":", lw=1.3)]
    labels += ["hollow: a hypothesis of eq. (41) fails there", "right, solid: envelope eq. (41) as printed",
               "right, dotted: envelope (38)+(40)"]
    for text in notes:
        handles.append(plt.Line2D([], [], color="none"))
        labels.append(wrap(text, DOUBLE / 2 - 0.5, 7))
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    fig.suptitle(wrap(f"{params['data']['name']}: " + (title_from_data(measured) if not measured.empty
                                                       else "training across weight decay λ"), DOUBLE))
    table = pd.concat([
        data.assign(series="training"),
        measured.assign(series="measured_gap"),
        env.assign(series="envelope"),
    ], ignore_index=True)
    return save(fig, table, params, root, name)
