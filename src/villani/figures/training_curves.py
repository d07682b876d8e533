"""Fig 5: training curves of every update rule, how fast the AdamW runs reach a common loss,
and F(θ_t) − F* against the eq. (41) envelope of every run that learned.

Top left: training loss vs step, mean ± s.e.m. over seeds, per λ (colour) and update rule
(line style: AdamW, Adam on F, Langevin SGD on F = eq. 36, noisy AdamW, sweep arms);
per-step losses are smoothed by :func:`villani.statistics.convergence.moving_average` over
:func:`~villani.statistics.convergence.loss_window` = max(1, T/40) steps before averaging over seeds; the
band is ±1 s.e.m. across seeds (sd/√n). Thin grey dotted lines: each seed's common target ℓ*
(:func:`villani.statistics.convergence.seed_times`: 90% of the way from the seed's highest start to the
highest of its λ's lowest smoothed losses, over the AdamW runs that learned). Top right:
‖θ‖² vs step. Bottom left: per seed, the steps each AdamW λ takes to ℓ* (filled, solid — the
ledger's ``fig5_faster_with_lam``) and to 90% of its own drop (t₉₀, hollow, dotted — the
finding ``fig5_t90_own_minimum``): they disagree where a large λ plateaus higher. Bottom right:
F(θ_t) − F* at the checkpoints (F on the measurement set, F* = 0 — a lower bound of min F,
``villani.bounds.table``), mean ± s.e.m. over seeds, on a log axis, for every run with λ > 0 —
whether the optimizer minimises F at all is visible here (AdamW's decoupled decay need not).
The eq. (41) envelope with β = 1/λ and C_LS(F) ≤ s/λ + d/λ² from λ and d (as the paper draws it)
is drawn over every run that learned (final perplexity below the unigram model's), as printed
(solid) and as eqs. (38)+(40) give it (dotted), averaged over seeds; checkpoints where a
hypothesis of Theorem 2 fails (an update rule other than eq. 36, η > λ/(4σ²), …) are hollow.
The legend says why a run has no envelope; the title counts the checkpoints where the printed
envelope holds where its hypotheses hold, and names the runs whose F rises.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds.theory import F_STAR_LOWER, envelope
from villani.diagnostics.collapse import baseline_ppl, beats_baseline
from villani.statistics.convergence import loss_window, moving_average, seed_times
from villani.figures.style import DOUBLE, lam_color, run_label, variant_label, variant_style, wrap
from villani.io.results import bounds_frame, data_stats, measurements, training_log
from villani.plan.runs import runs


def _sem(x) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def run_logs(params: Mapping, root, variants=None) -> dict:
    """{run: its per-step training log} of every run (of ``variants``)."""
    return {r: training_log(params, r, root) for r in runs(params, variants)}


def curves(params: Mapping, root, logs: Mapping | None = None) -> pd.DataFrame:
    """Long table: variant, lam, step, loss_mean, loss_sem, theta_sq_mean, theta_sq_sem, n_seeds."""
    window = loss_window(params.train.steps)
    per_run = [log.assign(loss_smooth=moving_average(log["loss"], window), variant=r.variant, lam=r.lam, seed=r.seed)
               for r, log in (run_logs(params, root) if logs is None else logs).items()]
    df = pd.concat(per_run, ignore_index=True)
    g = df.groupby(["variant", "lam", "step"], sort=False)
    out = pd.DataFrame({
        "loss_mean": g["loss_smooth"].mean(), "loss_sem": g["loss_smooth"].agg(_sem),
        "theta_sq_mean": g["theta_sq_norm"].mean(), "theta_sq_sem": g["theta_sq_norm"].agg(_sem),
        "n_seeds": g["seed"].nunique(),
    }).reset_index()
    return out


def learned_runs(params: Mapping, root) -> set[tuple[str, float, int]]:
    """(variant, λ, seed) of every run whose final validation perplexity beats the unigram model's."""
    m = measurements(params, root, variants=None)
    final = m.sort_values("step").groupby(["variant", "lam", "seed"])["val_ppl"].last()
    unigram = baseline_ppl(data_stats(params, root))
    return {(v, float(lam), int(seed)) for (v, lam, seed), p in final.items() if beats_baseline(p, unigram)}


def speed(params: Mapping, logs: Mapping, learned: set) -> pd.DataFrame:
    """Per learned AdamW run: the seed's common target and the steps to it and to 90% of its own
    drop (:func:`villani.statistics.convergence.seed_times` on the raw per-step loss)."""
    curves_ = {(r.lam, r.seed): (log["step"], log["loss"]) for r, log in logs.items()
               if r.variant == "adamw" and (r.variant, float(r.lam), int(r.seed)) in learned}
    rows = seed_times(curves_, loss_window(params.train.steps))
    return pd.DataFrame(rows, columns=["lam", "seed", "target", "start", "lowest", "to_common", "to_own"])


def draw_speed(ax, times: pd.DataFrame) -> None:
    """Bottom left: steps to ℓ* (filled, solid) and t₉₀ to the own floor (hollow, dotted) per seed vs λ."""
    if times.empty:
        ax.text(0.5, 0.5, "no learned AdamW run", transform=ax.transAxes, ha="center", va="center")
        return
    lams = sorted(times["lam"].unique())
    pos = {lam: i for i, lam in enumerate(lams)}
    for seed, g in times.sort_values("lam").groupby("seed"):
        x = g["lam"].map(pos).to_numpy(float) + 0.04 * (int(seed) - 1.5)
        ax.plot(x, g["to_common"], "-", color="0.35", lw=0.7)
        ax.plot(x, g["to_own"], ":", color="0.35", lw=0.7)
        ax.scatter(x, g["to_common"], c=[lam_color(v) for v in g["lam"]], s=14, zorder=3)
        ax.scatter(x, g["to_own"], facecolors="none", edgecolors=[lam_color(v) for v in g["lam"]], s=14, zorder=3)
    ax.set_xticks(range(len(lams)), [f"{v:g}" for v in lams])
    ax.set(xlabel="AdamW λ", ylabel="optimizer steps", title="steps to the seed's common target ℓ* (filled)\n"
           "and t₉₀ to the run's own floor (hollow), per seed")


def envelopes(params: Mapping, root, learned: set, num: int = 121) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(measured, envelope): per (variant, λ > 0) and checkpoint the gap F − F* (mean ± s.e.m.
    over seeds, and how many seeds meet the envelope's hypotheses there); both envelope
    forms on a step grid (mean over seeds) for the runs that ``learned`` ((variant, λ, seed))."""
    b = bounds_frame(params, root)
    b = b[b["status"] == "ok"].copy()
    if b.empty:
        empty = pd.DataFrame(columns=["variant", "lam", "step"])
        return empty, empty
    b["gap"] = b["F"] - F_STAR_LOWER
    b["applicable"] = b["envelope_status"] == "ok"
    b["learned"] = [(v, float(lam), int(seed)) in learned for v, lam, seed in zip(b["variant"], b["lam"], b["seed"])]
    g = b.groupby(["variant", "lam", "step"], sort=False)
    measured = pd.DataFrame({"gap_mean": g["gap"].mean(), "gap_sem": g["gap"].agg(_sem), "n_seeds": g.size(),
                             "n_applicable": g["applicable"].sum(), "n_learned": g["learned"].sum(),
                             "n_holds": g["envelope_check"].agg(lambda c: int((c == "holds").sum())),
                             "status": g["envelope_status"].first()}).reset_index()
    grid = np.linspace(0.0, params.train.steps, num)
    env_rows = []
    for (variant, lam, seed), r in b.groupby(["variant", "lam", "seed"], sort=False):
        r0 = r.iloc[0]
        args = (float(r0["f0"]) - F_STAR_LOWER, float(r0["c_ls"]), float(r0["eta"]),
                float(r0["smoothness_L"]), float(r0["sigma_sq"]), float(lam))
        if not bool(r0["learned"]) or not np.all(np.isfinite(args)):
            continue
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
            reason = ("did not learn (final perplexity ≥ the unigram model's)" if not m["n_learned"].any()
                      else _reason(str(m["status"].iloc[-1])))
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


def _legend(fig, ax_loss, notes: list[str]) -> None:
    handles, labels = ax_loss.get_legend_handles_labels()
    handles += [plt.Line2D([], [], color="0.5", ls=":", lw=0.8),
                plt.Line2D([], [], color="0.3", marker="o", ls="none", mfc="none", ms=3.5),
                plt.Line2D([], [], color="0.3", lw=1.0), plt.Line2D([], [], color="0.3", ls=":", lw=1.3)]
    labels += ["top left, grey dotted: each seed's common target ℓ*",
               "bottom right, hollow: a hypothesis of Theorem 2 fails there",
               "bottom right, solid: envelope eq. (41) as printed (every learned run, λ > 0)",
               "bottom right, dotted: envelope (38)+(40)"]
    for text in notes:
        handles.append(plt.Line2D([], [], color="none"))
        labels.append(wrap(text, DOUBLE / 2 - 0.5, 7))
    fig.legend(handles, labels, loc="outside lower center", ncol=2)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    logs = run_logs(params, root)
    learned = learned_runs(params, root)
    data, times = curves(params, root, logs), speed(params, logs, learned)
    measured, env = envelopes(params, root, learned)
    fig, ((a1, a2), (a4, a3)) = plt.subplots(2, 2, figsize=(DOUBLE, 6.6))
    draw_curves(a1, a2, data)
    for target in times.groupby("seed")["target"].first().dropna():
        a1.axhline(target, color="0.5", ls=":", lw=0.8)
    n = int(data["n_seeds"].max())
    a1.set(xlabel="optimizer step", ylabel="training loss (nats/token)", title=f"training loss\n±1 s.e.m. over {n} seeds")
    a2.set(xlabel="optimizer step", ylabel="‖θ‖²", title="parameter norm\n")
    a2.set_yscale("log")
    draw_speed(a4, times)
    notes = []
    if measured.empty:
        a3.text(0.5, 0.5, "no λ > 0:\neq. (41) is undefined for λ = 0", transform=a3.transAxes, ha="center",
                va="center")
    else:
        notes = draw_envelope(a3, measured, env)
    a3.set(xlabel="optimizer step", ylabel="F(θ_t) − F*, F* = 0 (nats/token)",
           title="F at the checkpoints\nand its envelopes")
    _legend(fig, a1, notes)
    fig.suptitle(wrap(f"{params['data']['name']}: " + (title_from_data(measured) if not measured.empty
                                                       else "training across weight decay λ"), DOUBLE))
    table = pd.concat([
        data.assign(series="training"),
        times.assign(series="time_to_target"),
        measured.assign(series="measured_gap"),
        env.assign(series="envelope"),
    ], ignore_index=True)
    return save(fig, table, params, root, name)
