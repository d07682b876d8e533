"""Token blocks: cutting, Parquet round trip, and one-line errors for bad files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from villani.data import load_blocks
from villani.data.blocks import cut_blocks, write_blocks


def test_cut_blocks_drops_remainder_and_caps():
    ids = np.arange(23, dtype=np.int32)
    assert cut_blocks(ids, 5).tolist() == [list(range(i, i + 5)) for i in range(0, 20, 5)]
    assert cut_blocks(ids, 5, max_blocks=2).shape == (2, 5)
    assert cut_blocks(ids, 24).shape == (0, 24)


def test_parquet_round_trip_and_atomic_write(tmp_path):
    blocks = np.random.default_rng(0).integers(0, 50_000, size=(37, 8), dtype=np.int32)
    path = tmp_path / "x.parquet"
    write_blocks(path, blocks)
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"], "no temp file left behind"
    got = load_blocks(path)
    assert got.dtype == torch.int64 and torch.equal(got, torch.from_numpy(blocks.astype(np.int64)))


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "train.parquet"
    write_blocks(path, np.arange(64 * 40, dtype=np.int32).reshape(40, 64))
    return path


def _one_line_error(path, match):
    with pytest.raises(ValueError) as err:
        load_blocks(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and match in msg, msg
    chained = err.value.__cause__ or (None if err.value.__suppress_context__ else err.value.__context__)
    assert chained is None, "no pyarrow traceback chained to the error"


def test_truncated_file(good_file):
    data = good_file.read_bytes()
    good_file.write_bytes(data[: len(data) // 2])
    _one_line_error(good_file, "not a readable Parquet file")


def test_garbage_file(good_file):
    good_file.write_bytes(b"this is not parquet at all" * 10)
    _one_line_error(good_file, "not a readable Parquet file")


def test_corrupt_body(good_file):
    data = bytearray(good_file.read_bytes())
    data[8:400] = bytes(392)  # zero the first column chunk, keep the footer
    good_file.write_bytes(bytes(data))
    with pytest.raises(ValueError) as err:
        load_blocks(good_file)
    assert "\n" not in str(err.value) and str(good_file) in str(err.value)


def test_wrong_column_name(good_file):
    pq.write_table(pa.table({"tokens": pa.array([[1, 2], [3, 4]], type=pa.list_(pa.int32(), 2))}), good_file)
    _one_line_error(good_file, "expected exactly one column 'input_ids'")


def test_wrong_column_type(good_file):
    pq.write_table(pa.table({"input_ids": pa.array([[1, 2, 3], [4]])}), good_file)
    _one_line_error(good_file, "expected fixed_size_list<int32>")


def test_null_blocks(good_file):
    arr = pa.array([[1, 2], None], type=pa.list_(pa.int32(), 2))
    pq.write_table(pa.table({"input_ids": arr}), good_file)
    _one_line_error(good_file, "null")


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_blocks(tmp_path / "nope.parquet")
