"""Fig 6: the PAC-Bayes bound (eq. 43–44, β = 1/λ) as a perplexity vs validation perplexity.

One point per checkpoint and seed, colour = λ. Filled circles: certified by the formula;
crosses: the KL bound was negative and clamped to 0 (``pb_kl_clamped`` — then the number
is only what any KL ≥ 0 would give, not a certified bound); a red ring: vacuous
(bound ≥ vocabulary size). The diagonal y = x separates bounds that hold (above) from
bounds that fail (below). The legend gives per λ the mean bound/perplexity ratio and R²
(squared correlation of bound and perplexity), from ``bounds.json``. λ = 0 has no bound.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np

from villani.figures.style import fmt_num, lam_color, lam_label, note, plain_log_ticks
from villani.io.results import bounds_frame, bounds_summary
from villani.plan import layout


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    b = bounds_frame(params, root)
    summary = bounds_summary(params, root)["summary"]
    vocab = bounds_summary(params, root)["inputs"]["vocab_size"]
    ok = b[b["status"] == "ok"].copy()
    fig, ax = plt.subplots(figsize=(6.8, 5.6))
    for lam, d in ok.groupby("lam"):
        c = lam_color(lam)
        pb = summary[layout.format_lam(lam)]["pac_bayes"]
        r2 = "undefined" if pb["r2"] is None else f"{pb['r2']:.3f}"
        label = (f"{lam_label(lam)}: ratio {fmt_num(pb['mean_ratio'])}, R² {r2}"
                 f" ({pb['n_kl_clamped']}/{pb['n_checkpoints']} clamped, {pb['n_vacuous']} vacuous)")
        clamped = d["pb_kl_clamped"].astype(bool).to_numpy()
        vac = d["pb_vacuous"].astype(bool).to_numpy()
        x, y = d["val_ppl"].to_numpy(float), d["pb_ppl_bound"].to_numpy(float)
        ax.scatter(x[~clamped], y[~clamped], color=c, s=30, label=label if (~clamped).any() else None)
        ax.scatter(x[clamped], y[clamped], color=c, marker="x", s=36, label=None if (~clamped).any() else label)
        if vac.any():
            ax.scatter(x[vac], y[vac], facecolors="none", edgecolors="red", s=110, lw=1.2)
    finite = ok[np.isfinite(ok["pb_ppl_bound"])]
    vals = np.concatenate([finite["val_ppl"], finite["pb_ppl_bound"]]) if len(finite) else np.array([1.0, 10.0])
    lo, hi = vals.min() / 1.3, vals.max() * 1.3
    ax.plot([lo, hi], [lo, hi], color="0.3", lw=1, ls="--", label="y = x")
    ax.axhline(vocab, color="red", lw=0.8, ls=":", label=f"vacuous: bound ≥ vocabulary size {vocab}")
    ax.scatter([], [], facecolors="none", edgecolors="red", s=110, lw=1.2, label="vacuous checkpoint")
    ax.scatter([], [], color="0.4", marker="x", s=36, label="× = KL bound < 0, clamped to 0")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, max(hi, vocab * 1.3)),
           xlabel="validation perplexity", ylabel="PAC-Bayes bound as perplexity, exp(R̂ + complexity)",
           title="PAC-Bayes bound (eq. 43–44, β = 1/λ) vs validation perplexity")
    plain_log_ticks(ax)
    if (b["status"] != "ok").any():
        note(ax, "λ = 0: bound undefined (not drawn)", loc="lower right")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    cols = ["dataset", "lam", "seed", "step", "val_ppl", "pb_risk_hat", "pb_kl_raw", "pb_kl_used", "pb_complexity",
            "pb_risk_bound", "pb_ppl_bound", "pb_ppl_ratio", "pb_kl_clamped", "pb_vacuous", "status"]
    return save(fig, b[[c for c in cols if c in b.columns]], params, root, name)
