"""The data stage: text → tokenizer → token blocks per split, with statistics.

``tokenize(data_cfg, out_dir)`` computes, for the ``data`` group of params.yaml:

1. the documents of train, validation and test (``villani.data.sources``; a hub dataset
   is read from the Hugging Face cache, see ``villani fetch``; a split the source lacks
   is carved from the end of train);
2. the tokenizer: a byte-level BPE trained on the train documents
   (``tokenizer.kind: bpe``, ``vocab_size``) or a pretrained one
   (``kind: pretrained``, ``name`` = hub name or local path);
3. per split, the token stream (documents joined by the EOS/separator token) cut into
   consecutive blocks of ``seq_len`` tokens, the remainder dropped, optionally capped at
   ``max_blocks[split]``.

Every split must give at least one block, otherwise a one-line ``ValueError`` names the
split, its token count and ``seq_len``; nothing is written before all splits passed.

Files written to ``out_dir`` (each atomically; same config and library versions →
byte-identical files): ``tokenizer.json`` (a pretrained tokenizer's too, so later
stages never need the hub), ``train.parquet``, ``validation.parquet``, ``test.parquet``
(see ``villani.data.blocks``) and, last, ``stats.json``:

- ``name``, ``source``, ``revision`` (``data.revision``), ``source_commit`` (the hub
  commit it resolved to; null for a local source), ``text_column``, ``seq_len``,
  ``tokenizer_kind``, ``tokenizer_name``, ``vocab_size`` (``len`` of the tokenizer, added tokens included),
  ``eos_token``, ``eos_token_id``, ``tokenizer_sha256``, ``versions``;
- ``splits.<split>``: ``origin`` (``source`` or ``carved`` from train), ``documents``,
  ``characters``, ``text_sha256``, ``tokens`` (EOS separators included), ``blocks``
  (written), ``dropped_tokens`` (the remainder ``tokens mod seq_len``),
  ``capped_blocks`` (whole blocks left out by ``max_blocks``), ``file``, ``sha256``;
- ``baselines.unigram`` and ``baselines.bigram``: ``val_ppl``, ``val_loss``, ``smoothing`` —
  the n-gram models fitted on the train blocks and scored on the validation blocks with the
  model's next-token targets (:mod:`villani.data.baselines`); a run that does not beat the
  unigram has learned nothing from the data (:func:`villani.diagnostics.collapse.beats_baseline`).

:func:`villani.io.results.read_stats` reads it back.
"""

from __future__ import annotations

import logging
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from villani.data.baselines import ngram_baselines
from villani.data.blocks import cut_blocks, write_blocks
from villani.data.sources import SPLITS, open_source, read_splits
from villani.data.tokenizer import (
    EOS_TOKEN,
    encode_documents,
    load_pretrained,
    train_bpe,
)
from villani.io.atomic import sha256_file, write_text
from villani.io.records import write_record
from villani.plan import layout

log = logging.getLogger(__name__)


def tokenize(data_cfg: dict[str, Any], out_dir: str | Path) -> dict[str, Any]:
    """Run the data stage for ``data_cfg`` into ``out_dir``; return the stats dict."""
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    seq_len = int(data_cfg.get("seq_len", 64))
    tok_cfg = data_cfg.get("tokenizer") or {}
    kind = tok_cfg.get("kind", "bpe")
    caps = data_cfg.get("max_blocks") or {}

    source = open_source(data_cfg)
    texts = read_splits(data_cfg, source)
    tok, eos, eos_id = _tokenizer(kind, tok_cfg, texts)
    t1 = time.perf_counter()
    blocks, split_stats = _blocks(tok, texts, eos_id, seq_len, caps)
    vocab = int(tok.get_vocab_size(with_added_tokens=True))
    baselines = ngram_baselines(blocks["train"], blocks["validation"], vocab)
    t2 = time.perf_counter()

    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / layout.TOKENIZER_FILE, tok.to_str(pretty=True))
    for split in SPLITS:
        path = out_dir / layout.SPLIT_FILE.format(split=split)
        write_blocks(path, blocks[split])
        split_stats[split]["sha256"] = sha256_file(path)
    stats = {
        "name": data_cfg.get("name", "pydoc"),
        "source": data_cfg.get("source", "builtin:pydoc"),
        "revision": data_cfg.get("revision"),
        "source_commit": source.commit,
        "text_column": data_cfg.get("text_column", "text"),
        "seq_len": seq_len,
        "tokenizer_kind": kind,
        "tokenizer_name": tok_cfg.get("name") if kind == "pretrained" else None,
        "tokenizer_revision": tok_cfg.get("revision") if kind == "pretrained" else None,
        "vocab_size": vocab,
        "eos_token": eos,
        "eos_token_id": int(eos_id),
        "tokenizer_sha256": sha256_file(out_dir / layout.TOKENIZER_FILE),
        "splits": split_stats,
        "baselines": baselines,
        "versions": _versions(),
    }
    write_record(out_dir / layout.DATA_STATS_FILE, stats, "data_stats")
    log.info(
        "tokenized %s: %s (tokenizer %.2fs, encode %.2fs, write %.2fs)",
        stats["source"],
        ", ".join(f"{s} {split_stats[s]['blocks']} blocks" for s in SPLITS),
        t1 - t0,
        t2 - t1,
        time.perf_counter() - t2,
    )
    return stats


def _tokenizer(kind: str, tok_cfg: dict[str, Any], texts: dict) -> tuple[Any, str, int]:
    """The tokenizer of ``data.tokenizer`` (trained on the train split, or a pretrained one),
    its separator token and that token's id."""
    if kind == "bpe":
        tok = train_bpe(texts["train"].documents, int(tok_cfg.get("vocab_size", 512)))
        eos = EOS_TOKEN
    elif kind == "pretrained":
        tok, eos = load_pretrained(tok_cfg.get("name"), revision=tok_cfg.get("revision"))
    else:
        raise ValueError(f"data.tokenizer.kind: unknown kind {kind!r} (expected bpe or pretrained)")
    eos_id = tok.token_to_id(eos)
    if eos_id is None:
        raise ValueError(f"data.tokenizer: separator token {eos!r} is not in the tokenizer's vocabulary")
    return tok, eos, eos_id


def _blocks(tok, texts: dict, eos_id: int, seq_len: int, caps: dict) -> tuple[dict[str, Any], dict[str, dict]]:
    """Every split encoded and cut into blocks of ``seq_len`` tokens (at most ``caps[split]``),
    with its stats (without the file's sha256, added once it is written)."""
    blocks: dict[str, Any] = {}
    split_stats: dict[str, dict[str, Any]] = {}
    for split in SPLITS:
        text = texts[split]
        ids = encode_documents(tok, text.documents, eos_id)
        if len(ids) < seq_len:
            raise ValueError(
                f"data: split {split!r} has {len(ids)} tokens ({len(text.documents)} documents), "
                f"fewer than seq_len={seq_len}: no block of {seq_len} tokens"
            )
        blocks[split] = cut_blocks(ids, seq_len, caps.get(split))
        n_full = len(ids) // seq_len
        split_stats[split] = {
            "origin": text.origin,
            "documents": len(text.documents),
            "characters": text.characters,
            "text_sha256": text.sha256(),
            "tokens": int(len(ids)),
            "blocks": int(blocks[split].shape[0]),
            "dropped_tokens": int(len(ids) - n_full * seq_len),
            "capped_blocks": int(n_full - blocks[split].shape[0]),
            "file": f"{split}.parquet",
        }
    return blocks, split_stats


def _versions() -> dict[str, str]:
    """Versions that determine the output bytes (recorded for provenance)."""
    versions = {"python": platform.python_version()}
    for package in ("tokenizers", "transformers", "datasets", "pyarrow"):
        versions[package] = metadata.version(package)
    return versions
