"""Fig 6 across datasets: the PAC-Bayes bound vs validation perplexity, every dataset's
checkpoints in one plot, with each dataset's and the pooled R².

One point per checkpoint and seed of every λ > 0 (λ = 0 has no bound); colour = λ, marker
shape = dataset; a hollow marker is a KL bound clamped to 0, as the crosses of the
per-dataset Fig 6 (:mod:`villani.figures.pac_bayes`, which explains why the clamp makes
the "bound" essentially the training loss). The legend gives per dataset and pooled over all datasets
the mean bound/perplexity ratio and R² — the squared correlation of bound and perplexity
over every finite point, :func:`villani.bounds.table.tightness` (the paper's one pooled
"R² ≈ 0.93" for both corpora).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds.table import tightness
from villani.figures.style import fmt_num, lam_color, lam_label, note, plain_log_ticks
from villani.io.results import bounds_summary
from villani.plan.config import dataset_names, dataset_params

MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def rows_with_bound(doc: Mapping, root) -> dict[str, list[dict]]:
    """Per dataset, the bounds rows of λ > 0 (``status`` ok), with their dataset."""
    out = {}
    for ds in dataset_names(doc):
        rows = bounds_summary(dataset_params(doc, ds), root)["rows"]
        out[ds] = [dict(r, dataset=ds) for r in rows if r["status"] == "ok"]
    return out


def _r2_text(t: Mapping) -> str:
    return f"ratio {fmt_num(t['mean_ratio'])}, R² {fmt_num(t['r2'])} ({t['n_finite']} points)"


def render(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    per_ds = rows_with_bound(doc, root)
    pooled = [r for rows in per_ds.values() for r in rows]
    fig, ax = plt.subplots(figsize=(7.2, 5.8))
    for (ds, rows), marker in zip(per_ds.items(), MARKERS):
        ax.scatter([], [], color="0.4", marker=marker, s=30, label=f"{ds}: {_r2_text(tightness(rows))}")
        for r in rows:
            c = lam_color(r["lam"])
            ax.scatter(float(r["val_ppl"]), float(r["pb_ppl_bound"]) if r["pb_ppl_bound"] is not None else np.nan,
                       marker=marker, s=34, lw=1.2, edgecolors=c, facecolors="none" if r.get("pb_kl_clamped") else c)
    for lam in sorted({float(r["lam"]) for r in pooled}):
        ax.scatter([], [], color=lam_color(lam), marker="o", s=30, label=lam_label(lam))
    table = pd.DataFrame(pooled)
    if table.empty:
        note(ax, "no λ > 0 in any dataset: the bound is undefined for λ = 0", loc="upper left")
        table = pd.DataFrame({"dataset": list(per_ds), "status": "undefined"})
    else:
        vals = pd.to_numeric(pd.concat([table["val_ppl"], table["pb_ppl_bound"]]), errors="coerce").to_numpy(float)
        vals = vals[np.isfinite(vals) & (vals > 0)]
        lo, hi = (vals.min() / 1.3, vals.max() * 1.3) if vals.size else (1.0, 10.0)
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=1, ls="--", label="y = x")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
        plain_log_ticks(ax)
        ax.scatter([], [], marker="o", s=34, lw=1.2, edgecolors="0.4", facecolors="none",
                   label="hollow = KL bound < 0, clamped to 0")
    ax.set(xlabel="validation perplexity", ylabel="PAC-Bayes bound as perplexity",
           title=f"PAC-Bayes bound (β = 1/λ), all datasets: pooled {_r2_text(tightness(pooled))}")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    cols = ["dataset", "lam", "seed", "step", "val_ppl", "pb_ppl_bound", "pb_ppl_ratio", "pb_kl_clamped", "pb_vacuous",
            "status"]
    return save(fig, table[[c for c in cols if c in table.columns]], doc, root, name)
