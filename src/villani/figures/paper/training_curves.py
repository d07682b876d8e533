"""Fig 5 across datasets: training loss vs step, one panel per dataset (the paper's PTB
and WikiText-103 panels).

Each panel is the left panel of the per-dataset Fig 5 (:mod:`villani.figures.training_curves`:
:func:`~villani.figures.training_curves.curves` and
:func:`~villani.figures.training_curves.draw_curves`): the per-step loss smoothed by a
centred moving average of max(1, T/40) steps, mean ± 1 s.e.m. over seeds, colour = λ and
line style = update rule, as in every figure. Every panel has its own step axis (the
datasets train for different numbers of steps); one legend below the panels names every
run group of every dataset. Drawn at print width (:data:`~villani.figures.style.DOUBLE`).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import pandas as pd

from villani.figures.style import DOUBLE, wrap
from villani.figures.training_curves import curves, draw_curves
from villani.plan.config import dataset_names, dataset_params


def render(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    names = dataset_names(doc)
    fig, axes = plt.subplots(1, len(names), figsize=(DOUBLE, 3.2), squeeze=False)
    tables, legend = [], {}
    for ax, ds in zip(axes[0], names):
        data = curves(dataset_params(doc, ds), root)
        draw_curves(ax, None, data)
        n = int(data["n_seeds"].max())
        ax.set(xlabel="optimizer step", ylabel="training loss (nats/token)",
               title=f"{ds}\n" + (f"mean ± 1 s.e.m. over {n} seeds" if n > 1 else "one seed (no s.e.m.)"))
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
        tables.append(data.assign(dataset=ds))
    fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=3)
    fig.suptitle(wrap("Training loss across weight decay λ, every update rule, per corpus", DOUBLE))
    table = pd.concat(tables, ignore_index=True)
    return save(fig, table[["dataset"] + [c for c in table.columns if c != "dataset"]], doc, root, name)
