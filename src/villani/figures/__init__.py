"""Figures and tables of the paper, rendered from the workflow's results.

Each figure or table is a function ``render(params, root, *, name, save) -> list[str]``
(one module per figure; the tables share :mod:`.tables`) that reads the results, draws,
and hands the figure and a DataFrame of the plotted numbers to ``save``
(:func:`villani.figures.style.save_figure`), which writes every format of
``figures.formats`` and a CSV beside it, atomically, under ``results/figures/{dataset}/``
(tables: ``results/tables/{dataset}/``). :data:`REGISTRY` names them in the paper's
order; :func:`figure_outputs` lists their files for the Snakefile (with a report
category and an ``.rst`` caption, package data in ``villani/report/``, :data:`CAPTIONS`).
``docs/figures.md`` says what each shows and where the paper's numbers differ. The
figures and tables that put several datasets side by side are in :mod:`villani.figures.paper`
(registry :data:`villani.figures.paper.REGISTRY`, captions in ``villani/report/paper/``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Callable, Mapping

from villani.plan import layout

REPORT_DIR = Path(str(files("villani").joinpath("report")))  # captions: package data


@dataclass(frozen=True)
class Entry:
    """One registered output: its render function as ``"module:function"`` of this package
    (imported when it renders, so that listing the outputs — the Snakefile's parse — loads
    no matplotlib, pandas or torch), report category and kind ("figure" writes one image
    per format and a CSV under figures/; "table" a CSV under tables/)."""

    renderer: str
    category: str
    kind: str

    @property
    def render(self) -> Callable:
        module, _, function = self.renderer.partition(":")
        return getattr(importlib.import_module(f"villani.figures.{module}"), function)


REGISTRY: dict[str, Entry] = {
    "fig2_radial_rays": Entry("radial_rays:render", "Landscape", "figure"),
    "fig3_landscape": Entry("landscape:render", "Landscape", "figure"),
    "fig4_spectrum": Entry("spectrum:render", "Spectrum", "figure"),
    "fig5_training_curves": Entry("training_curves:render", "Training", "figure"),
    "fig6_pac_bayes": Entry("pac_bayes:render", "Bounds", "figure"),
    "fig7_psi_vs_ppl": Entry("psi_vs_ppl:render", "Diagnostics", "figure"),
    "fig8_trace_histograms": Entry("trace_histograms:render", "Trace estimator", "figure"),
    "fig9_trace_cv": Entry("trace_cv:render", "Trace estimator", "figure"),
    "fig10_scaling": Entry("scaling:render", "Bounds", "figure"),
    "table1_hyperparameters": Entry("tables:render_hyperparameters", "Tables", "table"),
    "table1_guideline_checks": Entry("tables:render_guidelines", "Tables", "table"),
    "table3_trace_stats": Entry("tables:render_trace_stats", "Tables", "table"),
    "table_efficiency": Entry("tables:render_efficiency", "Tables", "table"),
}

CAPTIONS = {name: str(REPORT_DIR / f"{name}.rst") for name in REGISTRY}
CLAIMS_CAPTION = str(REPORT_DIR / "claims.rst")


def figure_outputs(params: Mapping, root: str = layout.RESULTS, dataset: str | None = None
                   ) -> list[tuple[str, str, str]]:
    """(name, category, path) of every file the figures stage writes for the params'
    dataset (or ``dataset``: the Snakefile passes the wildcard ``{dataset}``)."""
    dataset = params["data"]["name"] if dataset is None else dataset
    return registry_outputs(REGISTRY, params["figures"]["formats"], root, dataset)


def registry_outputs(registry: Mapping[str, Entry], formats, root, dataset: str) -> list[tuple[str, str, str]]:
    """(name, category, path) of every file the entries of ``registry`` write under
    ``dataset``'s folders: a figure in each of ``formats`` plus its CSV, a table's CSV."""
    fig_dir = layout.fmt(layout.FIGURES_DIR, root, dataset=dataset)
    tab_dir = layout.fmt(layout.TABLES_DIR, root, dataset=dataset)
    out = []
    for name, e in registry.items():
        if e.kind == "figure":
            out += [(name, e.category, f"{fig_dir}/{name}.{ext}") for ext in formats]
            out.append((name, e.category, f"{fig_dir}/{name}.csv"))
        else:
            out.append((name, e.category, f"{tab_dir}/{name}.csv"))
    return out


def render_all(params: Mapping, root: str = layout.RESULTS, names=None) -> list[str]:
    """Render every registered figure/table (or those in ``names``); return the written paths.

    All or nothing: every figure is rendered (so every input read and checked) into memory
    first; files are written only when all succeeded, so a bad input never leaves some
    outputs new and others old."""
    from functools import partial

    from villani.figures.style import save_figure
    from villani.io import atomic

    staged: dict[str, bytes] = {}
    written = []
    for name, e in REGISTRY.items():
        if names is None or name in names:
            written += e.render(params, root, name=name,
                                save=partial(save_figure, sink=lambda path, data: staged.__setitem__(str(path), data)))
    for path, data in staged.items():
        atomic.write_bytes(path, data)
    return written
