"""The last lines of a workflow run: where its figures, tables, claims ledger and report are,
what the ledger found, and the commands that open them — a few lines, not a file list.

The ledger's findings are read from ``results/claims/{dataset}.json``'s ``counts``: a map
from verdict to count, or from a class of claims to such a map (each level printed as it
is, so a new class or verdict needs no change here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from villani.plan import layout
from villani.plan.config import dataset_names

__all__ = ["format_counts", "summary"]


def format_counts(counts) -> str:
    """``{"supported": 3, "refuted": 1}`` → ``supported 3, refuted 1``; a map of such maps →
    ``<key>: supported 3, refuted 1; <key>: …``."""
    if not isinstance(counts, Mapping):
        return str(counts)
    if all(isinstance(v, Mapping) for v in counts.values()):
        return "; ".join(f"{k}: {format_counts(v)}" for k, v in counts.items())
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def _ledger(root, dataset: str) -> str:
    path = layout.fmt(layout.CLAIMS_JSON, root, dataset=dataset)
    try:
        counts = json.loads(Path(path).read_text()).get("counts")
    except (OSError, ValueError):
        return f"{path} not readable"
    return format_counts(counts) if counts else "no counts"


def summary(doc: Mapping, root=layout.RESULTS) -> list[str]:
    """The closing lines of a run of ``doc`` (a resolved parameter document)."""
    names = dataset_names(doc)
    lines = ["Results:"]
    for ds in names:
        fig, tab = (layout.fmt(p, root, dataset=ds) for p in (layout.FIGURES_DIR, layout.TABLES_DIR))
        lines += [f"  {ds}: figures {fig}/, tables {tab}/, metrics {layout.fmt(layout.METRICS, root, dataset=ds)}",
                  f"  {ds}: claims ledger {layout.fmt(layout.CLAIMS_CSV, root, dataset=ds)} — {_ledger(root, ds)}"]
    across = layout.across(names)
    lines += [f"  across datasets: {layout.fmt(layout.FIGURES_DIR, root, dataset=across)}/",
              "Open them:",
              f"  snakemake --report {root}/report.html   # every figure and table with its caption, one page",
              f"  villani claims-report{'' if len(names) == 1 else ' --dataset ' + names[0]}"
              "                      # what the data say about each claim of the paper",
              "  dvc plots show                             # training curves and scatters per λ (params.yaml's dataset)"]
    return lines
