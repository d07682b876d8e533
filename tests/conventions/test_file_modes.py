"""Files the workflow writes carry the process umask (0644 under umask 022), not the 0600
of a temporary file: on a shared cluster the group can read the results."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from villani.io import atomic


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_atomic_writes_follow_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        atomic.write_text(tmp_path / "a.txt", "x")
        atomic.write_json(tmp_path / "sub" / "b.json", {"x": 1})
        atomic.write_with(tmp_path / "c.bin", lambda tmp: Path(tmp).write_bytes(b"\0"))
        atomic.write_text(tmp_path / "a.txt", "replaced")  # over an existing file
    finally:
        os.umask(old)
    for f in ("a.txt", "sub/b.json", "c.bin"):
        assert stat.S_IMODE((tmp_path / f).stat().st_mode) == 0o666 & ~mask, f
    assert not list(tmp_path.rglob("*.tmp"))


def test_tokenized_data_is_readable_by_the_group(tiny_data_root):
    """A real stage's outputs (tokenizer, Parquet splits, stats), written under the test
    process's umask."""
    files = [f for f in Path(tiny_data_root).rglob("*") if f.is_file()]
    assert files
    want = 0o666 & ~_umask()
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: oct(want) for f in files}
