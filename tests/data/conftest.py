"""Fixtures of the data-stage tests: configs and small local corpora written per test."""

from __future__ import annotations

import os
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


class HubCache:
    """A Hugging Face hub cache in a temporary folder, laid out as downloads leave it:
    ``<repo_type>s--<owner>--<name>/snapshots/<commit>/<files>`` and, per branch or tag,
    ``refs/<revision>`` holding the commit, snapshot files relative symlinks into ``blobs/``.
    What a download would have put there is
    written directly; everything that reads it is the real huggingface_hub/datasets/
    transformers code (offline)."""

    def __init__(self, root: Path):
        self.root = root

    def add(self, repo_id: str, files: dict[str, bytes | Path], *, revision: str = "main",
            repo_type: str = "dataset") -> str:
        """Put ``files`` (repo path → bytes, or a local file to copy) at ``revision``; return the commit."""
        import hashlib
        import re

        is_commit = re.fullmatch(r"[0-9a-f]{40}", revision) is not None
        commit = revision if is_commit else hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
        repo = self.root / (f"{repo_type}s--" + repo_id.replace("/", "--"))
        for rel, content in files.items():  # content in blobs/, the snapshot file a relative symlink to it
            data = content.read_bytes() if isinstance(content, Path) else content
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            path = repo / "snapshots" / commit / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(os.path.relpath(blob, path.parent))
        if not is_commit:
            ref = repo / "refs" / revision
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit)
        return commit

    def add_folder(self, repo_id: str, folder: Path, *, revision: str = "main", repo_type: str = "model") -> str:
        """Put every file of a local ``folder`` (e.g. a ``save_pretrained`` output) at ``revision``."""
        files = {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.add(repo_id, files, revision=revision, repo_type=repo_type)


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> HubCache:
    """An empty hub cache as ``HF_HUB_CACHE``, with ``HF_HUB_OFFLINE`` on."""
    from huggingface_hub import constants

    root = tmp_path / "hf-hub"
    root.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return HubCache(root)


def parquet_bytes(column: str, rows: list[str]) -> bytes:
    """One Parquet file with a single string column."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({column: rows}), buf)
    return buf.getvalue()
