"""Tokenizers: train a byte-level BPE, load a pretrained one, encode a split, reload.

- ``train_bpe(documents, vocab_size)`` trains a GPT-2-style byte-level BPE with
  ``tokenizers`` on the given documents: the 256-symbol byte alphabet is always in the
  vocabulary (so every string is encodable and ``decode(encode(text)) == text``), plus
  the special separator ``<|endoftext|>`` and merges up to ``vocab_size`` tokens in all.
  Training is deterministic: the same documents give a byte-identical tokenizer.json.
- ``load_pretrained(name)`` loads a tokenizer by hub name or local path through
  ``transformers.AutoTokenizer`` (fast tokenizers only, ``trust_remote_code=False``) and
  returns its backend ``tokenizers.Tokenizer`` (truncation and padding switched off) and
  its separator: the EOS token, or the SEP token when it has no EOS. A ``results/data/
  <dataset>`` folder of the tokenize stage is read by ``load_tokenizer`` (its EOS from
  ``stats.json``). A hub tokenizer
  comes from the Hugging Face cache (``villani fetch`` puts it there); one neither cached
  nor downloadable is a one-line error saying so.
- ``encode_documents(tok, documents, eos_id)`` is the token stream of a split: the
  documents' ids (no special tokens added by post-processors) with ``eos_id`` between
  consecutive documents, as an int32 array.
- ``load_tokenizer(out_dir)`` rebuilds a ``transformers.PreTrainedTokenizerFast`` from
  the saved ``tokenizer.json`` (never the hub), with the EOS token and
  ``model_max_length = seq_len`` taken from ``stats.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from villani.data import hub
from villani.plan import layout
from villani.plan.writers import how_to_rewrite

EOS_TOKEN = "<|endoftext|>"
_BATCH = 512  # documents per encode call (bounds the memory of Encoding objects)


def train_bpe(documents: Sequence[str], vocab_size: int):
    """Train a byte-level BPE with ``<|endoftext|>`` on ``documents``; return the Tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        min_frequency=0,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(documents, trainer=trainer, length=len(documents))
    return tok


def load_pretrained(name: str, key: str = "data.tokenizer.name", revision: str | None = None):
    """Return (backend Tokenizer, separator token) of a pretrained fast tokenizer at
    ``revision`` (a hub branch, tag or commit; default main); errors name ``key`` (the
    parameter or option that gave ``name``)."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    if not name:
        raise ValueError(f"{key}: kind 'pretrained' needs a hub name or local path")
    try:
        if _is_data_folder(name):  # the tokenize stage's own folder: tokenizer.json + stats.json (its EOS)
            hf = load_tokenizer(name)
        else:
            hf = AutoTokenizer.from_pretrained(name, revision=revision, trust_remote_code=False, use_fast=True)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if hub.is_hub_name(name) and (hub.offline() or "connect" in first.lower()):
            raise hub.not_cached(key, f"tokenizer {name!r}") from None
        raise ValueError(f"{key}: cannot load tokenizer {name!r}: {first}") from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"{key}: {name!r} has no fast (tokenizers) backend")
    sep = hf.eos_token or hf.sep_token
    if sep is None:
        raise ValueError(f"{key}: tokenizer {name!r} has neither an EOS nor a SEP token")
    tok = Tokenizer.from_str(backend.to_str())
    tok.no_truncation()
    tok.no_padding()
    return tok, str(sep)


def _is_data_folder(name: str) -> bool:
    """A ``results/data/<dataset>`` folder of the tokenize stage (no tokenizer_config.json)."""
    folder = Path(name)
    return (folder / layout.TOKENIZER_FILE).is_file() and (folder / layout.DATA_STATS_FILE).is_file() and not (
        folder / "tokenizer_config.json").exists()


def encode_documents(tok, documents: Sequence[str], eos_id: int) -> np.ndarray:
    """Token ids of ``documents`` joined by ``eos_id`` (between documents), as int32."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    sep = np.array([eos_id], dtype=np.int32)
    parts: list[np.ndarray] = []
    for start in range(0, len(documents), _BATCH):
        for enc in encode(list(documents[start : start + _BATCH]), add_special_tokens=False):
            if parts:
                parts.append(sep)
            parts.append(np.asarray(enc.ids, dtype=np.int32))
    if not parts:
        return np.zeros(0, dtype=np.int32)
    return np.concatenate(parts)


def load_tokenizer(out_dir: str | Path):
    """The saved tokenizer of a data folder as a ``PreTrainedTokenizerFast``: EOS set, and
    EOS as its padding token too (GPT-2's convention), so a padded batch works through it."""
    from transformers import PreTrainedTokenizerFast

    from villani.io.results import read_stats

    out_dir = Path(out_dir)
    path = out_dir / layout.TOKENIZER_FILE
    if not path.is_file():
        raise ValueError(f"{path}: tokenizer file not found ({how_to_rewrite(path, missing=True)} first)")
    stats = read_stats(out_dir)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=stats["eos_token"], pad_token=stats["eos_token"])
    tok.model_max_length = int(stats["seq_len"])
    return tok
