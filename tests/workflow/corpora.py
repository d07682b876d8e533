"""Two small generated corpora for tests/configs/two_corpora.yaml, written under ``root``.

- ``alpha`` (``source: files``): CPython's documentation topics (``pydoc_data``, shipped
  with every interpreter), one text file per split;
- ``beta`` (``hf:corpora/beta``): sentences of a tiny arithmetic language ("three plus
  four is seven."), one row per sentence, in ``{split}.parquet`` files with a ``text``
  column — read through ``datasets.load_dataset`` like a hub dataset's cached files;
- ``neo``: a tiny GPT-Neo saved with ``save_pretrained`` (seeded random weights), beta's
  ``model.name`` with ``init: pretrained`` — a local stand-in for EleutherAI/gpt-neo-125m.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SPLITS = ("train", "validation", "test")
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen")


def write_corpora(root: Path) -> None:
    from pydoc_data.topics import topics

    alpha = root / "corpora" / "alpha"
    alpha.mkdir(parents=True, exist_ok=True)
    keys = sorted(topics)
    cut = {"train": keys[: len(keys) * 8 // 10], "validation": keys[len(keys) * 8 // 10: len(keys) * 9 // 10],
           "test": keys[len(keys) * 9 // 10:]}
    for split, ks in cut.items():
        (alpha / f"{split}.txt").write_text("\n\n".join(topics[k] for k in ks))
    beta = root / "corpora" / "beta"
    beta.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    for split, n in (("train", 3000), ("validation", 300), ("test", 300)):
        rows = []
        for _ in range(n):
            a, b = rng.randrange(10), rng.randrange(9)
            rows.append(f"{WORDS[a]} plus {WORDS[b]} is {WORDS[a + b]}.")
        pq.write_table(pa.table({"text": rows}), beta / f"{split}.parquet")
    write_pretrained_model(root / "corpora" / "neo")


def write_pretrained_model(folder: Path) -> None:
    import torch
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    cfg = GPTNeoConfig(vocab_size=320, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                       window_size=16, attention_types=[[["global", "local"], 1]], max_position_embeddings=32)
    torch.manual_seed(7)
    GPTNeoForCausalLM._from_config(cfg, attn_implementation="eager").save_pretrained(folder)
