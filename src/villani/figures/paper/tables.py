"""Tables II and III across datasets.

- ``table2_corpora`` (Table II): per dataset and split the corpus as tokenized — source,
  revision and the commit it resolved to, tokenizer and vocabulary, block length, and
  documents, characters, tokens (EOS separators included), blocks and dropped tokens —
  from each dataset's ``stats.json``.
- ``table3_trace_stats`` (Table III): the per-dataset Table III
  (:func:`villani.figures.tables.trace_stats`) of every dataset, stacked: one row per
  dataset × λ.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from villani.bounds.table import format_row
from villani.figures.tables import trace_stats
from villani.io.results import data_stats
from villani.plan.layout import SPLITS
from villani.plan.config import dataset_names, dataset_params


def corpora(doc: Mapping, root) -> pd.DataFrame:
    """One row per dataset × split from the datasets' ``stats.json``."""
    rows = []
    for ds in dataset_names(doc):
        st = data_stats(dataset_params(doc, ds), root)
        for split, s in sorted(st["splits"].items(), key=lambda kv: SPLITS.index(kv[0])):
            rows.append({
                "dataset": ds, "split": split, "source": st["source"], "revision": st.get("revision"),
                "source_commit": st.get("source_commit"), "tokenizer": st.get("tokenizer_name") or st["tokenizer_kind"],
                "vocab_size": st["vocab_size"], "seq_len": st["seq_len"], "origin": s["origin"],
                "documents": s["documents"], "characters": s["characters"], "tokens": s["tokens"],
                "blocks": s["blocks"], "dropped_tokens": s["dropped_tokens"], "capped_blocks": s["capped_blocks"],
            })
    return pd.DataFrame(rows)


def render_corpora(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    return save(None, corpora(doc, root), doc, root, name, kind="table")


def render_trace_stats(doc: Mapping, root, *, name: str, save: Callable) -> list[str]:
    rows = [r for ds in dataset_names(doc) for r in trace_stats(dataset_params(doc, ds), root).to_dict("records")]
    return save(None, pd.DataFrame([format_row(r) for r in rows]), doc, root, name, kind="table")
