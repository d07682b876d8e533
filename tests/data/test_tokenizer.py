"""Tokenizers: byte-level BPE round trip, pretrained tokenizer by local path, reload."""

from __future__ import annotations

import pytest
from transformers import PreTrainedTokenizerFast

from villani.data import load_blocks, load_tokenizer, tokenize
from villani.data.tokenizer import EOS_TOKEN, train_bpe
from villani.io.results import read_stats


def test_byte_level_bpe_round_trips_any_text(pydoc_out, sample_text):
    out, _ = pydoc_out
    tok = load_tokenizer(out)
    for text in (sample_text, sample_text * 3, " leading", "\x00\x7f bytes \u200b zero-width", ""):
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    assert tok.convert_ids_to_tokens(tok.eos_token_id) == EOS_TOKEN
    assert len(tok) == read_stats(out)["vocab_size"] == 512
    assert tok.model_max_length == 64


def test_trained_bpe_has_the_byte_alphabet_and_the_requested_size(sample_text):
    tok = train_bpe([sample_text] * 5, 300)
    assert tok.get_vocab_size() == 300
    text = "never seen: ξ ∑ 🙂"
    assert tok.decode(tok.encode(text).ids) == text


def test_pretrained_tokenizer_by_local_path(tmp_path, make_cfg, make_lines, sample_text):
    """kind pretrained loads via AutoTokenizer from a save_pretrained folder; its
    tokenizer.json is copied so the data folder alone reloads it."""
    backend = train_bpe(make_lines("pre", 300) + [sample_text], 400)
    pretrained = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN)
    pretrained.save_pretrained(tmp_path / "pretrained")

    (tmp_path / "train.txt").write_text("\n".join(make_lines("train", 400)))
    cfg = make_cfg(
        source="files",
        files={"train": str(tmp_path / "train.txt")},
        tokenizer={"kind": "pretrained", "name": str(tmp_path / "pretrained"), "vocab_size": 512},
        seq_len=16,
    )
    stats = tokenize(cfg, tmp_path / "out")
    assert stats["tokenizer_kind"] == "pretrained" and stats["tokenizer_name"] == str(tmp_path / "pretrained")
    assert stats["vocab_size"] == 400 and stats["eos_token"] == EOS_TOKEN

    # the pretrained folder is no longer needed
    for f in (tmp_path / "pretrained").iterdir():
        f.unlink()
    (tmp_path / "pretrained").rmdir()
    tok = load_tokenizer(tmp_path / "out")
    assert tok.get_vocab() == pretrained.get_vocab()
    first_doc = (tmp_path / "train.txt").read_text()
    blocks = load_blocks(tmp_path / "out" / "train.parquet")
    assert blocks[:2].reshape(-1).tolist() == pretrained.encode(first_doc, add_special_tokens=False)[:32]


def test_pretrained_tokenizer_that_cannot_be_loaded(tmp_path, make_cfg):
    cfg = make_cfg(tokenizer={"kind": "pretrained", "name": str(tmp_path / "missing"), "vocab_size": 512})
    with pytest.raises(ValueError, match="data.tokenizer.name") as err:
        tokenize(cfg, tmp_path / "out")
    assert "\n" not in str(err.value)
