"""Fig 7: the Villani diagnostic Ψ_s vs validation perplexity across checkpoints, one panel
per run group (variant and λ).

Ψ_s = −(tr∇²L + λd) + ‖∇F‖²/s is dominated by −λd, a constant within one λ, so the λ
groups sit at Ψ_s values orders of magnitude apart: each gets its own panel on a linear
axis, where the direction within the group is visible. One point per checkpoint and seed,
marker area growing with the step, a thin line joining each seed's checkpoints in step
order. Each panel's title gives the signed association the claims ledger decides Fig 7's
direction rows on — Pearson r within each seed's run, pooled over the seeds on Fisher's z
scale with a t interval (:func:`villani.stats.correlation_interval`; Spearman ρ needs ≥ 10
checkpoints per run for an interval that covers) — and the Pearson r of all the panel's
points, where the paper reports R² alone. The paper claims higher Ψ_s goes with lower
perplexity (r < 0). A group whose runs all collapsed (:mod:`villani.collapse`) is drawn and
marked: the ledger decides nothing on it.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import (
    DOUBLE,
    fmt_num,
    lam_color,
    lam_label,
    plain_log_ticks,
    variant_label,
    variant_style,
    wrap,
)
from villani.collapse import is_collapsed
from villani.io.results import data_stats, measurements, vocabulary
from villani.plan.runs import variants
from villani.psi import psi_column
from villani.stats import correlation_interval, pearson_r


def correlations(m: pd.DataFrame, col: str, params: Mapping, vocab: int | None = None) -> pd.DataFrame:
    """Per (variant, λ): Pearson r of Ψ_s and validation perplexity within each run, pooled over
    the seeds (Fisher z, t) with its interval, the pooled Pearson r and r², and whether every
    run of the group collapsed (``vocab``: the vocabulary; ``None``: not checked)."""
    c = params["claims"]
    rows = []
    for (variant, lam), d in m.groupby(["variant", "lam"], sort=False):
        x, y = d[col].to_numpy(float), d["val_ppl"].to_numpy(float)
        runs = pd.factorize(d["seed"])[0]
        iv = correlation_interval(x, y, runs, kind="pearson", confidence=float(c["confidence"]))
        r = pearson_r(x, y)
        last = d.sort_values("step").groupby("seed").tail(1)
        collapsed = vocab is not None and all(is_collapsed(p, lo, vocab) for p, lo in zip(last["val_ppl"], last["val_loss"]))
        rows.append({"variant": variant, "lam": float(lam), "n": len(d), "r_within_runs": iv.estimate,
                     "r_ci_low": iv.low, "r_ci_high": iv.high, "pearson_r": r,
                     "r2": None if r is None else r * r, "collapsed": bool(collapsed)})
    return pd.DataFrame(rows)


def _direction(row) -> str:
    if row.collapsed:
        return "collapsed"
    lo, hi = row.r_ci_low, row.r_ci_high
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "undetermined"
    return "negative" if hi < 0 else "positive" if lo > 0 else "undetermined"


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    m = measurements(params, root, variants=None)
    s = float(params["measure"]["s_values"][0])
    col = psi_column(s)
    order = {v: i for i, v in enumerate(variants(params))}
    m = m.sort_values(["variant", "lam"], key=lambda c: c.map(order) if c.name == "variant" else c)
    corr = correlations(m, col, params, vocabulary(data_stats(params, root))[0])
    groups = list(m.groupby(["variant", "lam"], sort=False))
    n = len(groups)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(DOUBLE, 2.3 * nrows + 0.5), squeeze=False)
    steps = m["step"].to_numpy(float)
    span = max(np.ptp(steps), 1.0)
    for ax, ((variant, lam), d), row in zip(axes.ravel(), groups, corr.itertuples()):
        c, st = lam_color(lam), variant_style(variant)
        for _, r in d.groupby("seed"):
            r = r.sort_values("step")
            ax.plot(r[col], r["val_ppl"], color=c, lw=0.7, alpha=0.6, ls=st["ls"])
        size = 8 + 50 * (d["step"].to_numpy(float) - steps.min()) / span
        ax.scatter(d[col], d["val_ppl"], s=size, color=c, marker=st["marker"], alpha=0.9, edgecolors="white", lw=0.4)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useMathText=True)
        ci = ("" if row.r_ci_low is None or pd.isna(row.r_ci_low)
              else f" [{fmt_num(row.r_ci_low, 2)}, {fmt_num(row.r_ci_high, 2)}]")
        ax.set_title(f"{lam_label(lam)}, {variant_label(variant)}" + ("\ncollapsed: no verdict" if row.collapsed else "")
                     + f"\nr within runs {fmt_num(row.r_within_runs, 2)}{ci}\nr of all points {fmt_num(row.pearson_r, 2)}",
                     fontsize=7.5)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("validation perplexity")
    for ax in axes.ravel()[:n]:
        ax.set_xlabel(f"Ψ_s (s = {s:g})")
    dirs = corr.apply(_direction, axis=1)
    summary = (f"r < 0 (higher Ψ_s, lower perplexity) in {int((dirs == 'negative').sum())} of {len(corr)} groups, "
               f"r > 0 in {int((dirs == 'positive').sum())}, undetermined in {int((dirs == 'undetermined').sum())}"
               + (f", collapsed (no verdict) in {int((dirs == 'collapsed').sum())}" if (dirs == "collapsed").any() else ""))
    fig.suptitle(wrap(f"{params['data']['name']}: Ψ_s vs validation perplexity per λ and update rule — {summary} "
                      f"({int(100 * float(params['claims']['confidence']))}% intervals); marker area grows with the "
                      "step", DOUBLE))
    table = m[["variant", "lam", "seed", "step", col, "val_ppl", "val_loss", "laplacian_F", "lam_d",
               "grad_F_sq_norm"]].merge(corr, on=["variant", "lam"], how="left")
    return save(fig, table, params, root, name)
