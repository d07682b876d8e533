"""The measurement blocks of ``villani diagnose``, and the checks that the tokenizer fits
the model and the text — without them Ψ_s would be measured on meaningless tokens.

A tokenizer is refused (one line naming the tokenizer, the model and both numbers) when

- its vocabulary V does not match the model's embedding of E rows: V > E (ids without an
  embedding) or E > 1.01·V + 128 (more rows than padding to a multiple of 128 explains:
  the model was trained with another tokenizer);
- it maps the text to fewer than ``min_distinct`` distinct tokens (an empty or one-token
  tokenizer turns any text into end-of-text tokens; real text in a real tokenizer has
  hundreds).

The pipeline's own tokenizer folder ``results/data/<dataset>`` (``tokenizer.json`` +
``stats.json``) and a checkpoint folder ``ckpt/step<t>/`` (its saved tokenizer) are
tokenizers like any other (:func:`villani.data.tokenizer.load_pretrained`).

Before a model is loaded, ``--model`` is checked (:func:`check_model_folder`): a path that
does not exist (and is no hub name), a folder without ``config.json``, weights or — when
``--tokenizer`` is not given — tokenizer files is one line naming the folder and what it
lacks; a villani checkpoint folder (its ``checkpoint.json``) gets the checks ``measure``
makes (:func:`villani.training.checkpoint.verify_folder`: every file against its sha256,
and in a run's layout its identity and segment manifest), so a damaged or edited
checkpoint is refused in one line naming the file instead of being measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["measurement_blocks_for", "check_vocabulary", "check_distinct_tokens", "checked_counts",
           "checked_seq_len", "check_model_folder", "check_finite_weights", "checked_model", "MAX_PROBES"]

MAX_PROBES = 100_000  # as measure.num_probes (villani/schemas/params.schema.yaml)


def checked_counts(blocks, batch_size, probes, top_k, s_values, lanczos_steps) -> tuple[list[float], int]:
    """(s values, Lanczos steps), the counts checked against their bounds (``--probes`` ≤
    100,000 as ``measure.num_probes``); a bad one is a one-line ValueError naming its option."""
    for name, value, least, most in (("--blocks", blocks, 1, 10**6), ("--batch-size", batch_size, 1, 10**6),
                                     ("--probes", probes, 2, MAX_PROBES), ("--top-k", top_k, 1, 1000)):
        if not least <= int(value) <= most:
            raise ValueError(f"{name}: {value} is invalid (an integer ≥ {least} and ≤ {most:,})")
    s_values = [float(s) for s in s_values]
    if not s_values or any(not math.isfinite(s) or s <= 0 for s in s_values):
        raise ValueError(f"--s: {s_values} is invalid (values > 0)")
    lanczos_steps = int(lanczos_steps or max(3 * int(top_k), 20))
    if lanczos_steps < int(top_k):
        raise ValueError(f"--lanczos-steps: {lanczos_steps} < --top-k {top_k}")
    return s_values, lanczos_steps


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model",
                   "vocab.txt")


def check_model_folder(model_ref: str, tokenizer: str | None) -> dict | None:
    """``--model`` before anything is loaded (module doc); returns the folder's verified
    ``checkpoint.json``, or None (a hub name, or a folder without one)."""
    from pathlib import Path

    from villani.data import hub
    from villani.training.checkpoint import verify_folder

    folder = Path(model_ref)
    if not folder.exists():
        if hub.is_hub_name(model_ref):
            return None
        raise ValueError(f"--model: {model_ref}: no such folder (and not a hub name such as EleutherAI/gpt-neo-125m)")
    if not folder.is_dir():
        raise ValueError(f"--model: {model_ref}: not a folder (give the save_pretrained folder of a causal LM)")
    lacks = [what for what, names in (("config.json", ("config.json",)),
                                      ("weights (" + " or ".join(WEIGHT_FILES[::2]) + ")", WEIGHT_FILES),
                                      ("tokenizer files (" + ", ".join(TOKENIZER_FILES[:3]) + ", …; or pass "
                                       "--tokenizer)", TOKENIZER_FILES if tokenizer is None else ()))
             if names and not any((folder / n).is_file() for n in names)]
    if lacks:
        raise ValueError(f"--model: {model_ref}: the folder has no {' and no '.join(lacks)}")
    return verify_folder(folder)


def check_finite_weights(model, model_ref: str) -> None:
    """One-line ValueError naming the first tensor that holds NaN or inf (damaged weights)."""
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise ValueError(f"--model: {model_ref}: tensor {name!r} holds NaN or inf: corrupt weights (copy the folder "
                             "again; a villani checkpoint: retrain its segment)")


def checked_model(model_ref: str, tokenizer: str | None, seq_len: int | None):
    """(model, its folder's verified checkpoint.json or None, ``--seq-len``): ``--model``
    checked before it is loaded (:func:`check_model_folder`) and its weights after
    (:func:`check_finite_weights`), ``--seq-len`` against its positions."""
    from villani.model.causal_lm import load_causal_lm

    checkpoint = check_model_folder(model_ref, tokenizer)
    model = load_causal_lm(model_ref)
    check_finite_weights(model, model_ref)
    return model, checkpoint, checked_seq_len(seq_len, getattr(model.config, "max_position_embeddings", None))


def checked_seq_len(seq_len: int | None, max_pos: int | None) -> int:
    """``--seq-len`` (default min(256, the model's positions)), checked against the model."""
    seq_len = int(seq_len or min(256, max_pos or 256))
    if seq_len < 2 or (max_pos is not None and seq_len > max_pos):
        raise ValueError(f"--seq-len: {seq_len} is invalid (2 ≤ T ≤ the model's max_position_embeddings {max_pos})")
    return seq_len


def check_vocabulary(tokenizer: str, vocab: int, embedding_rows: int, model_ref: str, key: str) -> None:
    """One-line ValueError unless a tokenizer of ``vocab`` tokens fits an embedding of
    ``embedding_rows`` rows (module doc)."""
    if vocab > embedding_rows or embedding_rows > 1.01 * vocab + 128:
        raise ValueError(f"{key}: tokenizer {tokenizer!r} has {vocab:,} tokens but model {model_ref!r} embeds "
                         f"{embedding_rows:,}: not the model's tokenizer (for a villani checkpoint pass "
                         "--tokenizer results/data/<dataset>, or the checkpoint folder itself)")


def check_distinct_tokens(ids: np.ndarray, least: int, tokenizer: str, where: str, key: str) -> None:
    """One-line ValueError if ``ids`` hold fewer than ``least`` distinct tokens."""
    distinct = int(np.unique(ids).size)
    if distinct < int(least):
        raise ValueError(f"{key}: tokenizer {tokenizer!r} maps {where} ({len(ids):,} tokens) to {distinct} distinct "
                         f"tokens, fewer than --min-distinct-tokens {least}: an empty or foreign tokenizer, the "
                         "measurement would be meaningless")


def measurement_blocks_for(data_cfg: Mapping, tokenizer: str, *, split: str, seq_len: int, blocks: int,
                           set_seed: int, vocab_size: int, key: str = "--tokenizer", min_distinct: int = 16,
                           model_ref: str = "the model") -> dict[str, Any]:
    """The measurement blocks ``(blocks, seq_len)`` of ``split`` of a data source, encoded
    with ``tokenizer`` (module doc of :mod:`villani.measure.diagnose`), and where they came
    from. One-line ValueErrors for a tokenizer that does not fit (module doc), a split with
    too few tokens or blocks, and token ids the model has no embedding for."""
    from villani.data.blocks import cut_blocks
    from villani.data.sources import SPLITS, open_source, read_splits
    from villani.data.tokenizer import encode_documents, load_pretrained
    from villani.measure.measurement_set import sample_block_ids

    if split not in SPLITS:
        raise ValueError(f"--split: {split!r} is not one of {', '.join(SPLITS)}")
    tok, sep = load_pretrained(tokenizer, key=key)
    check_vocabulary(tokenizer, tok.get_vocab_size(with_added_tokens=True), int(vocab_size), model_ref, key)
    source = open_source(dict(data_cfg))
    text = read_splits(dict(data_cfg), source)[split]
    ids = encode_documents(tok, text.documents, tok.token_to_id(sep))
    check_distinct_tokens(ids, min_distinct, tokenizer, f"split {split!r} of {source.spec}", key)
    all_blocks = cut_blocks(ids, int(seq_len))
    n = int(all_blocks.shape[0])
    if int(blocks) > n:
        raise ValueError(f"--blocks: {blocks} > {n}, the number of {seq_len}-token blocks in split {split!r} of "
                         f"{source.spec} ({len(ids)} tokens); lower --blocks or --seq-len, or give more text")
    chosen = sample_block_ids(n, int(blocks), int(set_seed))
    x = torch.from_numpy(all_blocks[chosen].astype(np.int64))
    if int(x.max()) >= int(vocab_size):
        raise ValueError(f"{key}: {tokenizer!r} gives token id {int(x.max())} ≥ the model's vocabulary size "
                         f"{vocab_size}; use the model's own tokenizer")
    return {"blocks": x, "ids": chosen, "split_blocks": n, "tokens": len(ids), "source": source.spec,
            "source_commit": source.commit, "origin": text.origin, "text_sha256": text.sha256(), "separator": sep,
            "distinct_tokens": int(np.unique(ids).size)}
