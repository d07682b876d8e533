"""Contiguous fixed-length token blocks, and their Parquet files.

- ``cut_blocks(ids, seq_len, max_blocks)`` cuts a token stream into
  ``len(ids) // seq_len`` consecutive, non-overlapping blocks of ``seq_len`` tokens
  (block i = ``ids[i*seq_len:(i+1)*seq_len]``), drops the remainder, and keeps the first
  ``max_blocks`` blocks when a cap is given. Returns an int32 array ``(N, seq_len)``.
- ``write_blocks(path, blocks)`` writes them as Parquet with one column ``input_ids`` of
  type ``fixed_size_list<int32>[seq_len]`` (zstd, with page CRCs that the reader verifies; the
  same blocks give byte-identical files), atomically (temp file + fsync + ``os.replace``).
- ``load_blocks(path)`` reads such a file back as a ``torch.LongTensor (N, seq_len)``.
  A truncated, corrupt or wrong-schema file raises a one-line ``ValueError`` naming the
  file and the problem.
- ``load_split(params, root, split)`` is how a stage reads a split: ``load_blocks`` of the
  params' dataset, checked against its ``stats.json`` — the file's sha256, the block length
  ``data.seq_len``, every id below ``vocab_size``, the number of blocks — so a token file
  from another tokenization or damaged on disk is named instead of indexing out of range.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from villani.io.atomic import sha256_file, write_with
from villani.plan.writers import how_to_rewrite

COLUMN = "input_ids"
_ROW_GROUP = 65536


def cut_blocks(ids: np.ndarray, seq_len: int, max_blocks: int | None = None) -> np.ndarray:
    """Consecutive blocks of ``seq_len`` tokens (remainder dropped, optional cap)."""
    n = len(ids) // seq_len
    if max_blocks is not None:
        n = min(n, int(max_blocks))
    return np.ascontiguousarray(ids[: n * seq_len], dtype=np.int32).reshape(n, seq_len)


def blocks_table(blocks: np.ndarray) -> pa.Table:
    """The Arrow table of ``blocks`` (N, seq_len): column ``input_ids``, fixed-size lists."""
    n, seq_len = blocks.shape
    flat = pa.array(np.ascontiguousarray(blocks, dtype=np.int32).reshape(-1), type=pa.int32())
    column = pa.FixedSizeListArray.from_arrays(flat, seq_len)
    return pa.table({COLUMN: column})


def write_blocks(path: str | Path, blocks: np.ndarray) -> None:
    """Write ``blocks`` to ``path`` as Parquet, atomically."""
    table = blocks_table(blocks)
    write_with(
        path,
        lambda tmp: pq.write_table(
            table, tmp, compression="zstd", row_group_size=_ROW_GROUP, write_statistics=False, store_schema=True,
            write_page_checksum=True,
        ),
    )


def load_blocks(path: str | Path):
    """Read a blocks file as ``torch.LongTensor (N, seq_len)``; bad files give a one-line ValueError."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: blocks file not found; {how_to_rewrite(path, missing=True)}")
    try:
        table = pq.read_table(path, page_checksum_verification=True)
    except (pa.ArrowException, OSError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(f"{path}: not a readable Parquet file ({reason})") from None
    if table.column_names != [COLUMN]:
        raise ValueError(f"{path}: expected exactly one column {COLUMN!r}, found {table.column_names}")
    kind = table.schema.field(COLUMN).type
    if not (pa.types.is_fixed_size_list(kind) and pa.types.is_integer(kind.value_type)):
        raise ValueError(f"{path}: column {COLUMN!r} has type {kind}, expected fixed_size_list<int32>[seq_len]")
    seq_len = kind.list_size
    column = table.column(COLUMN)
    if column.null_count:
        raise ValueError(f"{path}: column {COLUMN!r} has {column.null_count} null blocks")
    if table.num_rows == 0:
        raise ValueError(f"{path}: no blocks")
    chunks = [c.flatten() for c in column.chunks]
    values = pa.concat_arrays(chunks) if len(chunks) > 1 else chunks[0]
    if values.null_count:
        raise ValueError(f"{path}: column {COLUMN!r} has {values.null_count} null token ids")
    flat = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if flat.size != table.num_rows * seq_len:
        raise ValueError(f"{path}: {flat.size} token ids for {table.num_rows} blocks of {seq_len}")
    if flat.min() < 0:
        raise ValueError(f"{path}: negative token id {int(flat.min())}")
    return torch.from_numpy(flat.reshape(table.num_rows, seq_len))


def load_split(params, root, split: str):
    """The blocks of ``split`` of the params' dataset, checked against its ``stats.json``
    (:func:`check_blocks`); one-line ValueError naming file and field."""
    from villani.io.results import data_stats
    from villani.plan import layout

    dataset = params["data"]["name"]
    stats = data_stats(params, root)
    stats_path = layout.fmt(layout.DATA_STATS, root, dataset=dataset)
    path = layout.fmt(layout.SPLIT, root, dataset=dataset, split=split)
    record = stats["splits"][split]
    if "sha256" not in record:
        raise ValueError(f"{stats_path}: splits.{split}.sha256: missing (expected the sha256 of the split's file)")
    if path.is_file() and sha256_file(path) != record["sha256"]:
        raise ValueError(f"{path}: sha256 does not match splits.{split}.sha256 of {stats_path} "
                         f"(modified, or from another tokenization); {how_to_rewrite(path)}")
    return check_blocks(load_blocks(path), path, seq_len=params.data.seq_len,
                        vocab_size=int(stats["vocab_size"]), n_blocks=int(record["blocks"]),
                        stats_path=stats_path)


def check_blocks(blocks, path, *, seq_len: int, vocab_size: int, n_blocks: int | None = None, stats_path=None):
    """Token blocks ``(N, seq_len)`` of a split: the block length of the params, every id
    below the vocabulary size of ``stats.json``, N blocks as recorded there."""
    n, length = blocks.shape
    where = f" of {stats_path}" if stats_path else ""
    if length != seq_len:
        raise ValueError(f"{path}: blocks of {length} tokens, but data.seq_len = {seq_len} "
                         f"(tokenized under other parameters); {how_to_rewrite(path)}")
    top = int(blocks.max())
    if top >= vocab_size:
        raise ValueError(f"{path}: token id {top} ≥ vocab_size {vocab_size}{where} "
                         f"(expected ids below the vocabulary size); {how_to_rewrite(path)}")
    if n_blocks is not None and n != n_blocks:
        raise ValueError(f"{path}: {n} blocks, but {n_blocks} recorded{where} ; {how_to_rewrite(path)}")
    return blocks
