"""Fig 5 across datasets: training loss vs step, one panel per dataset (the paper's PTB
and WikiText-103 panels).

Each panel is the left panel of the per-dataset Fig 5 (:mod:`villani.figures.training_curves`):
the per-step loss smoothed by a centred moving average of max(1, T/40) steps, mean ± 1
s.e.m. over seeds per λ, noise-injection runs dashed. Every panel has its own step axis
(the datasets train for different numbers of steps); λ has the same colour in all.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from villani.figures.training_curves import curves, draw_curves
from villani.plan.config import dataset_names, dataset_params


def render(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    names = dataset_names(doc)
    fig, axes = plt.subplots(1, len(names), figsize=(5.6 * len(names), 4.2), squeeze=False)
    tables = []
    for ax, ds in zip(axes[0], names):
        data = curves(dataset_params(doc, ds), root)
        draw_curves(ax, None, data)
        ax.set(xlabel="optimizer step", ylabel="training loss L (nats/token)",
               title=f"{ds}: mean ± s.e.m. over {int(data['n_seeds'].max())} seed(s)")
        ax.legend(fontsize=7)
        tables.append(data.assign(dataset=ds))
    fig.suptitle("Training loss across weight decay λ", y=1.02)
    fig.tight_layout()
    table = pd.concat(tables, ignore_index=True)
    return save(fig, table[["dataset"] + [c for c in table.columns if c != "dataset"]], doc, root, name)
