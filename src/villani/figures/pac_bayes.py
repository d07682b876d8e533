"""Fig 6: the PAC-Bayes bound (eq. 43–44, β = 1/λ) — where its hypotheses hold — and why it
does not where they fail.

Left: the paper's KL bound before clamping, divided by d, at every checkpoint of every run
with λ > 0 (colour = λ, marker = update rule), against the step; a KL divergence is ≥ 0,
so a point below the zero line is not a possible KL and the bound built on it is no bound
(``hyp_kl_nonneg`` of ``bounds.csv``). For β = 1/λ the two d/2 terms alone add to
(d/2)·log((1 + λ²)/(2π)) ≈ −0.92·d (grey line), which βF rarely offsets.
Right: the bound as a perplexity, exp(R̂ + complexity), against validation perplexity, for
the checkpoints where every hypothesis holds (λ > 0, KL bound ≥ 0, L ≤ 1 nat — eq. 43 is
for losses in [0, 1]); y = x separates bounds that hold (above) from bounds that fail
(below), red rings mark vacuous ones (≥ the vocabulary size). The legend gives per run
group the mean bound/perplexity ratio, R² and Pearson r over those checkpoints; when no
checkpoint qualifies, the panel says so and counts each failed hypothesis. λ = 0 has no
bound.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np

from villani.bounds.hypotheses import FAMILIES, HYPOTHESES
from villani.figures.style import DOUBLE, fmt_num, lam_color, plain_log_ticks, run_label, variant_style, wrap
from villani.io.results import bounds_frame, bounds_summary
from villani.plan import layout


def failure_text(b) -> str:
    """``KL bound is ≥ 0 … fails at 24/24; …`` over the rows with λ > 0."""
    parts = []
    for h in FAMILIES["pac_bayes"]:
        k = int((b[f"hyp_{h}"].astype(object) == False).sum())  # noqa: E712 — False, not None
        if k:
            parts.append(f"“{HYPOTHESES[h]}” fails at {k}/{len(b)}")
    return "; ".join(parts)


def draw_kl(ax, pos) -> None:
    """The left panel: the KL bound / d before clamping against the step, per run group of
    ``pos`` (the rows with λ > 0), with the zero line and the d/2 terms alone per λ."""
    for (variant, lam), d in pos.groupby(["variant", "lam"], sort=False):
        st = variant_style(variant)
        ax.plot(d["step"], d["pb_kl_raw"] / d["d"], st["marker"], ls="none", color=lam_color(lam), ms=3.5,
                label=run_label(variant, lam))
    ax.axhline(0.0, color="0.2", lw=0.8)
    if len(pos):
        for lam in sorted(pos["lam"].unique()):
            ax.axhline(0.5 * math.log((1 + lam**2) / (2 * math.pi)), color=lam_color(lam), lw=0.6, ls="--")
    ax.set(xlabel="optimizer step", ylabel="KL bound / d  (eq. 44, before clamping)")


def draw_bound(ax, pos, summary: Mapping, vocab: int, width_in: float) -> None:
    """The right panel: bound vs validation perplexity at the checkpoints of ``pos`` where
    every hypothesis holds, per run group (legend: ratio, R², r from ``summary``, the
    dataset's ``bounds.json`` summary), y = x and the vacuous line; when none qualifies, the
    panel counts the failures of each hypothesis instead (text wrapped to ``width_in``)."""
    ok = pos[pos["pac_bayes_status"] == "ok"]
    if ok.empty:
        ax.text(0.5, 0.5, wrap("no checkpoint meets the bound's hypotheses:\n" + failure_text(pos), width_in, 7),
                transform=ax.transAxes, ha="center", va="center", fontsize=7)
        ax.set(xticks=[], yticks=[])
        ax.grid(False)
    else:
        for (variant, lam), d in ok.groupby(["variant", "lam"], sort=False):
            st = variant_style(variant)
            pb = summary[variant][layout.format_lam(lam)]["pac_bayes"]
            x, y = d["val_ppl"].to_numpy(float), d["pb_ppl_bound"].to_numpy(float)
            ax.scatter(x, y, color=lam_color(lam), marker=st["marker"], s=14,
                       label=f"{run_label(variant, lam)}: ratio {fmt_num(pb['mean_ratio'])}, R² {fmt_num(pb['r2'])}, "
                             f"r {fmt_num(pb['pearson_r'])} ({pb['n_applicable']}/{pb['n_checkpoints']} checkpoints)")
            vac = d["pb_vacuous"].astype(bool).to_numpy()
            if vac.any():
                ax.scatter(x[vac], y[vac], facecolors="none", edgecolors="red", s=50, lw=1.0)
        finite = ok[np.isfinite(ok["pb_ppl_bound"])]
        vals = np.concatenate([finite["val_ppl"], finite["pb_ppl_bound"]]) if len(finite) else np.array([1.0, 10.0])
        lo, hi = vals.min() / 1.3, vals.max() * 1.3
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=0.8, ls="--", label="y = x")
        ax.axhline(vocab, color="red", lw=0.8, ls=":", label=f"vacuous: bound ≥ vocabulary size {vocab}")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, max(hi, vocab * 1.3)))
        plain_log_ticks(ax)
        ax.legend(loc="upper left")
    ax.set(xlabel="validation perplexity", ylabel="bound as perplexity, exp(R̂ + complexity)")


COLUMNS = ["dataset", "variant", "lam", "seed", "step", "d", "val_ppl", "pb_risk_hat", "pb_kl_raw", "pb_kl_used",
           "pb_complexity", "pb_risk_bound", "pb_ppl_bound", "pb_ppl_ratio", "pb_vacuous", "hyp_kl_nonneg",
           "hyp_loss_le_1", "pac_bayes_status", "status"]


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    b = bounds_frame(params, root)
    doc = bounds_summary(params, root)
    pos = b[b["status"] == "ok"].copy()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(DOUBLE, 3.4))
    draw_kl(a1, pos)
    a1.set(title="the KL bound: below 0 no KL can be\n(dashed: the d/2 terms alone, (1/2)·log((1 + λ²)/2π))")
    draw_bound(a2, pos, doc["summary"], doc["inputs"]["vocab_size"], 3.2)
    a2.set(title="PAC-Bayes bound vs validation perplexity\nwhere every hypothesis holds")
    handles, labels = a1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3)
    n, k = len(pos), int((pos["pac_bayes_status"] == "ok").sum())
    fig.suptitle(wrap(f"{params['data']['name']}: PAC-Bayes bound (eq. 43–44, β = 1/λ) — its hypotheses hold at {k} "
                      f"of {n} checkpoints with λ > 0" + ("" if k else "; no bound is shown"), DOUBLE))
    return save(fig, b[[c for c in COLUMNS if c in b.columns]], params, root, name)
