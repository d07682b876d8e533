"""Fig 6 across datasets: the PAC-Bayes bound (eq. 43–44, β = 1/λ) of every corpus, with
each dataset's and the pooled R².

One column per dataset, the two panels of the per-dataset Fig 6
(:mod:`villani.figures.pac_bayes`) one above the other: top, the KL bound before clamping
divided by d at every checkpoint of every run with λ > 0 (below zero no KL can be, so the
bound built on it is no bound); bottom, the bound as a perplexity against validation
perplexity only at the checkpoints where every hypothesis holds (λ > 0, KL bound ≥ 0,
L ≤ 1 nat), or, where none does, the count of each failed hypothesis. Colour = λ, marker =
update rule, as in every figure. Each bottom panel's title gives that dataset's, the
figure's title the pooled (over all datasets) mean bound/perplexity ratio and R² over the
checkpoints where the hypotheses hold — the squared correlation of bound and perplexity,
:func:`villani.bounds.table.tightness` (the paper's one pooled "R² ≈ 0.93" for both
corpora); "undefined" where fewer than two such checkpoints exist. Drawn at print width (:data:`~villani.figures.style.DOUBLE`).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from villani.bounds.table import tightness
from villani.figures.pac_bayes import COLUMNS, draw_bound, draw_kl
from villani.figures.style import DOUBLE, fmt_num, wrap
from villani.io.results import bounds_frame, bounds_summary
from villani.plan.config import dataset_names, dataset_params


def _tightness_text(t: Mapping) -> str:
    return (f"ratio {fmt_num(t['mean_ratio'])}, R² {fmt_num(t['r2'])} "
            f"({t['n_applicable']} of {t['n_checkpoints']} checkpoints qualify)")


def render(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    names = dataset_names(doc)
    width = DOUBLE / len(names)
    fig, axes = plt.subplots(2, len(names), figsize=(DOUBLE, 5.8), squeeze=False)
    tables, legend, pooled = [], {}, []
    for col, ds in enumerate(names):
        p = dataset_params(doc, ds)
        b, summary = bounds_frame(p, root), bounds_summary(p, root)
        pos = b[b["status"] == "ok"].copy()
        top, bottom = axes[0][col], axes[1][col]
        draw_kl(top, pos)
        top.set(ylabel="KL bound / d (eq. 44)",
                title=f"{ds}: KL bound / d before clamping\n(dashed: the d/2 terms alone)")
        draw_bound(bottom, pos, summary["summary"], summary["inputs"]["vocab_size"], width - 0.4)
        rows = pos.to_dict("records")
        pooled += rows
        bottom.set(ylabel="bound as perplexity",
                   title=wrap(f"{ds}: bound vs perplexity where every hypothesis holds; "
                              + _tightness_text(tightness(rows)), width - 0.3))
        for handle, label in zip(*top.get_legend_handles_labels()):
            legend.setdefault(label, handle)
        tables.append(pos.assign(dataset=ds))
    fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=3)
    fig.suptitle(wrap("PAC-Bayes bound (eq. 43–44, β = 1/λ) across corpora — pooled over "
                      f"{', '.join(names)}: {_tightness_text(tightness(pooled))}", DOUBLE))
    table = pd.concat(tables, ignore_index=True)
    return save(fig, table[[c for c in COLUMNS if c in table.columns]], doc, root, name)
