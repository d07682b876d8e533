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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["measurement_blocks_for", "check_vocabulary", "check_distinct_tokens", "checked_counts",
           "checked_seq_len", "MAX_PROBES"]

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
