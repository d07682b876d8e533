"""Figures and tables of the paper, rendered from the workflow's results.

Each figure is one module with ``render(params, root) -> dict[str, pandas.DataFrame]``
that draws and saves its figure(s) and returns the plotted numbers; :func:`render_all`
writes every figure in each format of ``figures.formats`` plus a CSV of its numbers.
:data:`REGISTRY` names them; :func:`figure_outputs` lists their files for the Snakefile
(with a report category and an ``.rst`` caption in ``workflow/report/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from villani import layout
from villani.figures import training_curves

REPORT_DIR = Path(__file__).resolve().parents[3] / "workflow" / "report"

# name → (module, report category, kind): kind "figure" writes one image per format and a
# CSV; kind "table" writes a CSV only.
REGISTRY = {
    "fig5_training_curves": (training_curves, "Training", "figure"),
}

CAPTIONS = {name: str(REPORT_DIR / f"{name}.rst") for name in REGISTRY}


def figure_outputs(params: Mapping, root: str = layout.RESULTS) -> list[tuple[str, str, str]]:
    """(name, category, path) of every file the figures stage writes."""
    out = []
    fig_dir = layout.FIGURES_DIR.format(root=root)
    tab_dir = layout.TABLES_DIR.format(root=root)
    for name, (_, category, kind) in REGISTRY.items():
        if kind == "figure":
            out += [(name, category, f"{fig_dir}/{name}.{ext}") for ext in params["figures"]["formats"]]
            out.append((name, category, f"{fig_dir}/{name}.csv"))
        else:
            out.append((name, category, f"{tab_dir}/{name}.csv"))
    return out


def render_all(params: Mapping, root: str = layout.RESULTS) -> list[str]:
    """Render every registered figure/table; return the written paths."""
    from villani.figures.style import save_figure

    written = []
    for name, (module, _, kind) in REGISTRY.items():
        written += module.render(params, root, name=name, save=save_figure)
    return written
