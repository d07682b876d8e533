"""Fig 7: the Villani diagnostic Ψ_s vs validation perplexity, pooled over λ and within λ.

Every panel leaves out step 0 (each run's initialisation, where perplexity ≈ V and θ is the
same at every λ), as every correlation of the claims ledger does.

Top row, the AdamW runs that learned (final perplexity below the unigram model's), the paper's
Fig 7: left, the pooled scatter — every checkpoint of every λ and seed, colour = λ, marker
area growing with the step — with each λ's least-squares line (its colour) and the pooled line
(black, dashed); the title splits the pooled r into its within-λ and between-λ parts
(:func:`villani.statistics.samples.simpson_decomposition`). Right, the same checkpoints as deviations from
their λ's means: the direction within λ, which −λd (a constant within one λ) and the
perplexity that over-decay costs cannot set — Simpson's paradox when the two panels' signs
differ. Below, one panel per (update rule, λ) on its own linear Ψ_s axis, a thin line joining
each seed's checkpoints; titles give Pearson r within each seed's run pooled over seeds on
Fisher's z scale with a t interval (:func:`villani.statistics.intervals.correlation_interval`) and the r of all
the panel's points. The paper claims higher Ψ_s goes with lower perplexity (r < 0). A group with
a run that did not beat the unigram model (:mod:`villani.diagnostics.collapse`) is drawn and marked: the
ledger decides nothing on such a run.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from villani.diagnostics.collapse import baseline_ppl, beats_baseline
from villani.figures.style import DOUBLE, fmt_num, lam_color, lam_label, variant_label, variant_style, wrap
from villani.io.results import data_stats, measurements
from villani.io.tables import after_start
from villani.plan.runs import variants
from villani.diagnostics.psi import psi_column
from villani.statistics.intervals import correlation_interval, pearson_r
from villani.statistics.samples import simpson_decomposition


def correlations(m: pd.DataFrame, col: str, params: Mapping, unigram: float | None = None) -> pd.DataFrame:
    """Per (variant, λ): Pearson r of Ψ_s and validation perplexity within each run, pooled over
    the seeds (Fisher z, t) with its interval, the pooled Pearson r and r², and how many of its
    runs learned — final perplexity below ``unigram``, the corpus's unigram model's (``None``: not
    checked; the claims ledger decides nothing on a run that did not learn)."""
    c = params.claims
    rows = []
    for (variant, lam), d in m.groupby(["variant", "lam"], sort=False):
        x, y = d[col].to_numpy(float), d["val_ppl"].to_numpy(float)
        runs = pd.factorize(d["seed"])[0]
        iv = correlation_interval(x, y, runs, kind="pearson", confidence=c.confidence)
        r = pearson_r(x, y)
        last = d.sort_values("step").groupby("seed").tail(1)
        learned = len(last) if unigram is None else sum(bool(beats_baseline(p, unigram)) for p in last["val_ppl"])
        rows.append({"variant": variant, "lam": float(lam), "n": len(d), "r_within_runs": iv.estimate,
                     "r_ci_low": iv.low, "r_ci_high": iv.high, "pearson_r": r,
                     "r2": None if r is None else r * r, "runs": len(last), "runs_learned": int(learned)})
    return pd.DataFrame(rows)


def _direction(row) -> str:
    if row.runs_learned < row.runs:
        return "not learned"
    lo, hi = row.r_ci_low, row.r_ci_high
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "undetermined"
    return "negative" if hi < 0 else "positive" if lo > 0 else "undetermined"


def learned_adamw(m: pd.DataFrame, unigram: float) -> pd.DataFrame:
    """The AdamW checkpoints of runs whose final validation perplexity beats the unigram model's."""
    a = m[m["variant"] == "adamw"]
    final = a.sort_values("step").groupby(["lam", "seed"])["val_ppl"].transform("last").reindex(a.index)
    return a[[bool(beats_baseline(p, unigram)) for p in final]]


def _line(ax, x, y, **kw) -> None:
    """The least-squares line of y on x over x's range (nothing where x does not vary)."""
    if len(x) > 1 and np.ptp(x) > 0:
        b, a = np.polyfit(x, y, 1)
        xs = np.array([x.min(), x.max()])
        ax.plot(xs, a + b * xs, **kw)


def draw_simpson(ax_pool, ax_within, a: pd.DataFrame, col: str, span: float) -> None:
    """The pooled scatter with per-λ and pooled lines, and the within-λ deviations (module docstring)."""
    if a.empty:
        for ax in (ax_pool, ax_within):
            ax.text(0.5, 0.5, "no learned AdamW run", transform=ax.transAxes, ha="center", va="center")
        return
    dev = a.assign(dx=a[col] - a.groupby("lam")[col].transform("mean"),
                   dy=a["val_ppl"] - a.groupby("lam")["val_ppl"].transform("mean"))
    size = 8 + 40 * (a["step"].to_numpy(float) - a["step"].min()) / span
    for lam, g in dev.groupby("lam"):
        c, s = lam_color(lam), size[(a["lam"] == lam).to_numpy()]
        ax_pool.scatter(g[col], g["val_ppl"], s=s, color=c, alpha=0.85, edgecolors="white", lw=0.4, label=lam_label(lam))
        _line(ax_pool, g[col].to_numpy(float), g["val_ppl"].to_numpy(float), color=c, lw=1.2)
        ax_within.scatter(g["dx"], g["dy"], s=s, color=c, alpha=0.85, edgecolors="white", lw=0.4)
    _line(ax_pool, a[col].to_numpy(float), a["val_ppl"].to_numpy(float), color="black", ls="--", lw=1.2)
    _line(ax_within, dev["dx"].to_numpy(float), dev["dy"].to_numpy(float), color="black", ls="--", lw=1.2)
    d = simpson_decomposition(a[col], a["val_ppl"], a["lam"])
    ax_pool.set_title(wrap(f"pooled over λ (AdamW, learned): r = {fmt_num(d.pooled, 2)} = within-λ part "
                           f"{fmt_num(d.within, 2)} + between-λ part {fmt_num(d.between, 2)}", DOUBLE / 2 - 0.3, 7.5),
                      fontsize=7.5)
    ax_within.set_title(wrap(f"within λ: deviations from each λ's means, r = {fmt_num(d.r_within, 2)} (r of the λ "
                             f"means {fmt_num(d.r_between, 2)})", DOUBLE / 2 - 0.3, 7.5), fontsize=7.5)
    ax_pool.set(xlabel="Ψ_s", ylabel="validation perplexity")
    ax_within.set(xlabel="Ψ_s − its λ's mean", ylabel="perplexity − its λ's mean")
    for ax in (ax_pool, ax_within):
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
    ax_pool.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.1, 1.0), title="lines: least squares\nper λ; "
                   "dashed: pooled", title_fontsize=7)


def draw_group(ax, d: pd.DataFrame, row, col: str, steps: np.ndarray, span: float) -> None:
    """One (update rule, λ) panel: each seed's checkpoints joined in step order, titled with its r."""
    variant, lam = row.variant, row.lam
    c, st = lam_color(lam), variant_style(variant)
    for _, r in d.groupby("seed"):
        r = r.sort_values("step")
        ax.plot(r[col], r["val_ppl"], color=c, lw=0.7, alpha=0.6, ls=st["ls"])
    size = 8 + 50 * (d["step"].to_numpy(float) - steps.min()) / span
    ax.scatter(d[col], d["val_ppl"], s=size, color=c, marker=st["marker"], alpha=0.9, edgecolors="white", lw=0.4)
    ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ci = ("" if row.r_ci_low is None or pd.isna(row.r_ci_low)
          else f" [{fmt_num(row.r_ci_low, 2)}, {fmt_num(row.r_ci_high, 2)}]")
    ax.set_title(f"{lam_label(lam)}, {variant_label(variant)}" + (f"\nnot learned: {row.runs - row.runs_learned} of {row.runs} runs"
                                                              if row.runs_learned < row.runs else "")
                 + f"\nr within runs {fmt_num(row.r_within_runs, 2)}{ci}\nr of all points {fmt_num(row.pearson_r, 2)}",
                 fontsize=7.5)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    stats = data_stats(params, root)
    col = psi_column(params.measure.s_values[0])
    order = {v: i for i, v in enumerate(variants(params))}
    m = measurements(params, root, variants=None).dropna(subset=[col, "val_ppl"])
    m = after_start(m.sort_values(["variant", "lam"], key=lambda c: c.map(order) if c.name == "variant" else c))
    unigram = baseline_ppl(stats)
    corr = correlations(m, col, params, unigram)
    groups = list(m.groupby(["variant", "lam"], sort=False))
    ncols = 3
    nrows = math.ceil(len(groups) / ncols)
    fig = plt.figure(figsize=(DOUBLE, 3.2 + 2.3 * nrows + 0.6))
    grid = fig.add_gridspec(1 + nrows, 2 * ncols, height_ratios=[1.45] + [1.0] * nrows)
    steps = m["step"].to_numpy(float)
    span = max(np.ptp(steps), 1.0)
    a = learned_adamw(m, unigram)
    draw_simpson(fig.add_subplot(grid[0, :ncols]), fig.add_subplot(grid[0, ncols:]), a, col, span)
    for i, (((_, _), d), row) in enumerate(zip(groups, corr.itertuples())):
        ax = fig.add_subplot(grid[1 + i // ncols, 2 * (i % ncols):2 * (i % ncols) + 2])
        draw_group(ax, d, row, col, steps, span)
        ax.set_xlabel("Ψ_s")
        if i % ncols == 0:
            ax.set_ylabel("validation perplexity")
    dirs = corr.apply(_direction, axis=1)
    summary = (f"per λ and update rule, r < 0 (higher Ψ_s, lower perplexity) in {int((dirs == 'negative').sum())} of "
               f"{len(corr)} groups, r > 0 in {int((dirs == 'positive').sum())}, undetermined in "
               f"{int((dirs == 'undetermined').sum())}"
               + (f", not learned (no verdict) in {int((dirs == 'not learned').sum())}" if (dirs == "not learned").any()
                  else ""))
    fig.suptitle(wrap(f"{params['data']['name']}: Ψ_s vs validation perplexity after step 0 — {summary} "
                      f"({int(100 * params.claims.confidence)}% intervals); marker area grows with the "
                      "step", DOUBLE))
    table = m[["variant", "lam", "seed", "step", col, "val_ppl", "val_loss", "laplacian_F", "lam_d",
               "grad_F_sq_norm"]].merge(corr, on=["variant", "lam"], how="left")
    return save(fig, table, params, root, name)
