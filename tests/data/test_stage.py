"""The data stage on the embedded default (builtin:pydoc): files, counts, determinism, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import villani
from villani.data import load_blocks, load_tokenizer, tokenize
from villani.data.sources import read_splits
from villani.data.tokenizer import encode_documents
from villani.io.results import read_stats

SPLITS = ("train", "validation", "test")
OUTPUTS = ("tokenizer.json", "train.parquet", "validation.parquet", "test.parquet", "stats.json")


def test_default_writes_every_file_with_the_contract_schema(pydoc_out):
    out, stats = pydoc_out
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    assert read_stats(out) == stats
    assert stats["source"] == "builtin:pydoc" and stats["seq_len"] == 64
    assert stats["tokenizer_kind"] == "bpe" and stats["vocab_size"] == 512
    for split in SPLITS:
        schema = pq.read_schema(out / f"{split}.parquet")
        assert schema.names == ["input_ids"]
        assert str(schema.field("input_ids").type) == "fixed_size_list<element: int32>[64]"


def test_block_counts_are_tokens_floor_seq_len(pydoc_out):
    out, stats = pydoc_out
    seq_len = stats["seq_len"]
    for split in SPLITS:
        s = stats["splits"][split]
        blocks = load_blocks(out / f"{split}.parquet")
        assert blocks.dtype == torch.int64 and blocks.shape == (s["tokens"] // seq_len, seq_len)
        assert s["blocks"] == blocks.shape[0] >= 1
        assert s["dropped_tokens"] == s["tokens"] % seq_len and s["capped_blocks"] == 0
        assert 0 <= int(blocks.min()) and int(blocks.max()) < stats["vocab_size"]
    assert stats["splits"]["train"]["origin"] == "source"
    assert stats["splits"]["validation"]["origin"] == stats["splits"]["test"]["origin"] == "carved"


def test_blocks_are_the_contiguous_token_stream(pydoc_out, make_cfg):
    """Blocks = the documents encoded with EOS between them, cut in order; text recoverable."""
    out, stats = pydoc_out
    tok = load_tokenizer(out)
    assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id == stats["eos_token_id"]
    texts = read_splits(make_cfg())
    for split in SPLITS:
        ids = encode_documents(tok.backend_tokenizer, texts[split].documents, tok.eos_token_id)
        assert len(ids) == stats["splits"][split]["tokens"]
        blocks = load_blocks(out / f"{split}.parquet")
        assert np.array_equal(blocks.reshape(-1).numpy(), ids[: blocks.numel()])
        n_docs = stats["splits"][split]["documents"]
        assert int((blocks == tok.eos_token_id).sum()) <= n_docs - 1
    # the train stream decodes back to the pydoc topics joined by the separator
    train = load_blocks(out / "train.parquet").reshape(-1).tolist()
    joined = "<|endoftext|>".join(texts["train"].documents)
    assert joined.startswith(tok.decode(train))


def test_same_config_gives_identical_bytes_across_processes(pydoc_out, tmp_path):
    """A second run in a fresh interpreter (new hash seeds) writes byte-identical files."""
    first, _ = pydoc_out
    second = tmp_path / "again"
    env = dict(os.environ, PYTHONPATH=str(Path(villani.__file__).parents[1]), PYTHONHASHSEED="12345")
    code = (
        "import sys, json; from villani.data import tokenize; "
        "tokenize(json.loads(sys.argv[1]), sys.argv[2])"
    )
    cfg = json.dumps(read_cfg_of(first))
    subprocess.run([sys.executable, "-c", code, cfg, str(second)], check=True, env=env)
    for name in OUTPUTS:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def read_cfg_of(out: Path) -> dict:
    stats = read_stats(out)
    return {"source": stats["source"], "seq_len": stats["seq_len"], "tokenizer": {"kind": "bpe", "vocab_size": 512}}


def test_max_blocks_caps_each_split(tmp_path, make_cfg):
    stats = tokenize(make_cfg(seq_len=32, max_blocks={"train": 10, "validation": 3, "test": None}), tmp_path)
    assert [stats["splits"][s]["blocks"] for s in ("train", "validation")] == [10, 3]
    assert load_blocks(tmp_path / "train.parquet").shape == (10, 32)
    test = stats["splits"]["test"]
    assert test["blocks"] == test["tokens"] // 32 and test["capped_blocks"] == 0
    val = stats["splits"]["validation"]
    assert val["capped_blocks"] == val["tokens"] // 32 - 3


def test_too_small_split_is_a_one_line_error_naming_split_tokens_seq_len(tmp_path, make_cfg):
    (tmp_path / "train.txt").write_text("plenty of training text here. " * 400)
    (tmp_path / "val.txt").write_text("tiny")
    cfg = make_cfg(source="files", files={"train": str(tmp_path / "train.txt"), "validation": str(tmp_path / "val.txt")},
                   seq_len=16)
    out = tmp_path / "out"
    with pytest.raises(ValueError) as err:
        tokenize(cfg, out)
    msg = str(err.value)
    assert "\n" not in msg and "'validation'" in msg and "seq_len=16" in msg
    n_tokens = int(msg.split(" has ")[1].split(" tokens")[0])
    assert 0 < n_tokens < 16
    assert not out.exists(), "nothing is written when a split fails"


def test_unknown_source_is_rejected(tmp_path, make_cfg):
    with pytest.raises(ValueError, match="data.source"):
        tokenize(make_cfg(source="s3://bucket"), tmp_path)
