"""The paper's cross-dataset figures and tables, drawn from every dataset of the parameters.

Where the per-dataset outputs (:mod:`villani.figures`) show one corpus, these put the
corpora of one DAG side by side (``configs/paper.yaml``: PTB and WikiText-103), and are
written by ``villani paper`` to ``results/figures/paper/<datasets>/`` and
``results/tables/paper/<datasets>/``, ``<datasets>`` the datasets joined by ``+``
(:func:`villani.plan.layout.across`: ``paper/ptb+wikitext103``), so that running a subset
of the datasets never overwrites the outputs of all of them:

- ``fig5_training_curves``: training loss vs step, one panel per dataset;
- ``fig6_pac_bayes``: the PAC-Bayes bound vs validation perplexity, one marker per
  dataset, with each dataset's and the pooled R²;
- ``table2_corpora``: tokens, blocks and documents per dataset and split;
- ``table3_trace_stats``: the trace statistics per dataset × λ.

Each is ``render(doc, root, *, name, save) -> list[str]`` with ``doc`` the resolved
parameter document (:func:`villani.plan.config.resolve`, one dataset or several); the
datasets' parameters come from :func:`villani.plan.config.dataset_params`, the figure
formats from the document's top-level ``figures`` group (shared by all datasets). With a
single dataset they are drawn from that one.
"""

from __future__ import annotations

from typing import Mapping

from villani.figures import REPORT_DIR as _REPORT_DIR
from villani.figures import Entry, registry_outputs
from villani.plan import layout
from villani.plan.config import dataset_names

REPORT_DIR = _REPORT_DIR / "paper"  # captions: package data, villani/report/paper/

REGISTRY: dict[str, Entry] = {
    "fig5_training_curves": Entry("paper.training_curves:render", "Across datasets", "figure"),
    "fig6_pac_bayes": Entry("paper.pac_bayes:render", "Across datasets", "figure"),
    "table2_corpora": Entry("paper.tables:render_corpora", "Across datasets", "table"),
    "table3_trace_stats": Entry("paper.tables:render_trace_stats", "Across datasets", "table"),
}

CAPTIONS = {name: str(REPORT_DIR / f"{name}.rst") for name in REGISTRY}


def paper_outputs(doc: Mapping, root: str = layout.RESULTS) -> list[tuple[str, str, str]]:
    """(name, category, path) of every file ``villani paper`` writes."""
    return registry_outputs(REGISTRY, doc["figures"]["formats"], root, layout.across(dataset_names(doc)))


def render_paper(doc: Mapping, root: str = layout.RESULTS, names=None) -> list[str]:
    """Render every cross-dataset figure and table (or those in ``names``); return the paths."""
    from villani.figures.style import save_figure

    slot = layout.across(dataset_names(doc))

    def save(fig, data, _params, root, name, kind="figure"):
        return save_figure(fig, data, doc, root, name, kind, dataset=slot)

    written = []
    for name, e in REGISTRY.items():
        if names is None or name in names:
            written += e.render(doc, root, name=name, save=save)
    return written
