"""Fixtures of the data-stage tests: configs and small local corpora written per test."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE = (
    "Byte-level BPE must round-trip any text: naïve café, 日本語, emoji 🙂, tabs\tand\n"
    "  leading spaces, CRLF\r\nline ends, trailing spaces   \n\n"
    "def f(x):\n    return x ** 2  # comment\n"
)


def data_cfg(**overrides) -> dict:
    """A complete ``data`` group (schema defaults: pydoc, BPE 512, seq_len 64) with overrides."""
    cfg = {
        "name": "pydoc",
        "source": "builtin:pydoc",
        "files": {},
        "text_column": "text",
        "split_fractions": {"validation": 0.05, "test": 0.05},
        "tokenizer": {"kind": "bpe", "vocab_size": 512, "name": None},
        "seq_len": 64,
        "max_blocks": {"train": None, "validation": None, "test": None},
    }
    cfg.update(overrides)
    return cfg


def corpus_lines(tag: str, n: int) -> list[str]:
    """``n`` distinct sentences (PTB-like rows) tagged with ``tag``."""
    words = ["the", "market", "rose", "fell", "shares", "of", "company", "said", "on", "friday"]
    return [f"{tag} {i} " + " ".join(words[(i * k) % len(words)] for k in range(1, 9)) for i in range(n)]


@pytest.fixture(autouse=True)
def _hf_cache_in_tmp(tmp_path_factory, monkeypatch):
    """Keep `datasets`' Arrow cache out of the home folder."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.getbasetemp() / "hf-cache")


@pytest.fixture
def make_cfg():
    """``make_cfg(**overrides)``: a complete data group (see ``data_cfg``)."""
    return data_cfg


@pytest.fixture
def make_lines():
    """``make_lines(tag, n)``: distinct PTB-like sentences (see ``corpus_lines``)."""
    return corpus_lines


@pytest.fixture
def sample_text() -> str:
    return SAMPLE


@pytest.fixture(scope="session")
def pydoc_out(tmp_path_factory) -> tuple[Path, dict]:
    """The embedded default tokenized once: (out_dir, stats)."""
    from villani.data import tokenize

    out = tmp_path_factory.mktemp("pydoc")
    return out, tokenize(data_cfg(), out)
