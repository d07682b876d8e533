"""Sources: `files`, `hf:` (a real datasets.load_dataset on local data), `hf-disk:`, carving."""

from __future__ import annotations

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from villani.data import load_blocks, load_tokenizer, tokenize
from villani.data.sources import SplitText, carve_missing, read_splits

SPLITS = ("train", "validation", "test")


def test_files_source_reads_each_file_as_a_document(tmp_path, make_cfg, make_lines):
    for split, n in (("train", 3), ("validation", 1), ("test", 2)):
        for i in range(n):
            (tmp_path / f"{split}-{i}.txt").write_text("\n".join(make_lines(f"{split}{i}", 40)) + "\n")
    files = {
        "train": str(tmp_path / "train-*.txt"),  # a glob, expanded in sorted order
        "validation": str(tmp_path / "validation-0.txt"),  # one path
        "test": [str(tmp_path / "test-0.txt"), str(tmp_path / "test-1.txt")],  # a list
    }
    cfg = make_cfg(source="files", files=files, seq_len=16, tokenizer={"kind": "bpe", "vocab_size": 300})
    texts = read_splits(cfg)
    assert [len(texts[s].documents) for s in SPLITS] == [3, 1, 2]
    assert texts["train"].documents[0] == (tmp_path / "train-0.txt").read_text()
    assert all(texts[s].origin == "source" for s in SPLITS)
    stats = tokenize(cfg, tmp_path / "out")
    for split in SPLITS:
        s = stats["splits"][split]
        assert s["documents"] == len(texts[split].documents) and s["characters"] == texts[split].characters
        assert load_blocks(tmp_path / "out" / f"{split}.parquet").shape == (s["tokens"] // 16, 16)
    tok = load_tokenizer(tmp_path / "out")
    first = load_blocks(tmp_path / "out" / "validation.parquet")[0].tolist()
    assert texts["validation"].documents[0].startswith(tok.decode(first))


def test_files_source_carves_missing_splits_from_the_end_of_train(tmp_path, make_cfg, make_lines):
    text = "\n".join(make_lines("doc", 400)) + "\n"
    (tmp_path / "all.txt").write_text(text)
    cfg = make_cfg(source="files", files={"train": str(tmp_path / "all.txt")},
                   split_fractions={"validation": 0.1, "test": 0.2})
    texts = read_splits(cfg)
    parts = [texts[s].documents for s in SPLITS]
    assert "".join(d for p in parts for d in p) == text, "carving loses and reorders nothing"
    assert [texts[s].origin for s in SPLITS] == ["source", "carved", "carved"]
    # cuts land on line starts, and the tails hold at least their fraction of the characters
    assert texts["validation"].documents[0].startswith("doc ") and texts["test"].documents[0].startswith("doc ")
    assert len(text) * 0.2 <= texts["test"].characters < len(text) * 0.2 + 100
    assert len(text) * 0.1 <= texts["validation"].characters < len(text) * 0.1 + 100


def test_carving_whole_documents_and_single_lines():
    docs = ["a" * 10, "b" * 10, "c" * 10, "d" * 10]
    out = carve_missing({"train": SplitText(docs)}, {"validation": 0.25, "test": 0.25})
    assert [out[s].documents for s in SPLITS] == [docs[:2], docs[2:3], docs[3:]]
    # a document is cut at the start of the line the cut falls in
    out = carve_missing({"train": SplitText(["x" * 9 + "\n"] * 10)}, {"validation": 0.15, "test": 0.1})
    assert [out[s].characters for s in SPLITS] == [70, 20, 10]
    lines = "".join(f"line {i:04d}\n" for i in range(100))  # 10 characters each
    out = carve_missing({"train": SplitText([lines])}, {"validation": 0.055, "test": 0.104})
    assert [out[s].characters for s in SPLITS] == [830, 60, 110]
    assert out["test"].documents == [lines[-110:]] and out["validation"].documents == [lines[830:890]]
    # one single line (a text8-like corpus) is cut at the exact character
    out = carve_missing({"train": SplitText(["x" * 100])}, {"validation": 0.05, "test": 0.1})
    assert [out[s].characters for s in SPLITS] == [85, 5, 10]
    # rows without line breaks (PTB sentences) move whole
    out = carve_missing({"train": SplitText(["a" * 10, "b" * 10, "c" * 10])}, {"validation": 0.05, "test": 0.05})
    assert [out[s].documents for s in SPLITS] == [["a" * 10], ["b" * 10], ["c" * 10]]


def test_hf_source_loads_a_local_dataset_dir_with_its_splits(tmp_path, make_cfg, make_lines):
    """`hf:<dir>` goes through datasets.load_dataset: PTB-like parquet files, column `sentence`."""
    data = tmp_path / "ptb_like"
    data.mkdir()
    sizes = {"train": 600, "validation": 60, "test": 70}
    for split, n in sizes.items():
        rows = make_lines(split, n)
        rows[3] = "   "  # blank rows are dropped, as WikiText's empty lines
        pq.write_table(pa.table({"sentence": rows, "id": list(range(n))}), data / f"{split}.parquet")
    cfg = make_cfg(source=f"hf:{data}", text_column="sentence", seq_len=32)
    stats = tokenize(cfg, tmp_path / "out")
    for split, n in sizes.items():
        s = stats["splits"][split]
        assert s["origin"] == "source" and s["documents"] == n - 1
        assert s["blocks"] == s["tokens"] // 32 >= 1
    assert stats["text_column"] == "sentence"
    tok = load_tokenizer(tmp_path / "out")
    ids = load_blocks(tmp_path / "out" / "test.parquet").reshape(-1).tolist()
    assert tok.decode(ids).startswith("test 0 ") and "<|endoftext|>test 1 " in tok.decode(ids)

    with pytest.raises(ValueError, match=r"data.text_column: .*no column 'text' \(columns: sentence, id\)"):
        tokenize(make_cfg(source=f"hf:{data}", seq_len=32), tmp_path / "bad")


def test_hf_source_with_only_train_is_carved(tmp_path, make_cfg, make_lines):
    data = tmp_path / "only_train"
    data.mkdir()
    rows = [{"text": line} for line in make_lines("row", 500)]
    (data / "train.jsonl").write_text("\n".join(__import__("json").dumps(r) for r in rows) + "\n")
    texts = read_splits(make_cfg(source=f"hf:{data}"))
    assert [texts[s].origin for s in SPLITS] == ["source", "carved", "carved"]
    assert sum(len(texts[s].documents) for s in SPLITS) == 500


def test_hf_disk_source_reads_save_to_disk(tmp_path, make_cfg, make_lines):
    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {s: datasets.Dataset.from_dict({"text": make_lines(s, 300)}) for s in ("train", "validation")}
    ).save_to_disk(str(saved))
    texts = read_splits(make_cfg(source=f"hf-disk:{saved}"))
    assert len(texts["validation"].documents) == 300
    assert texts["train"].documents + texts["test"].documents == make_lines("train", 300)
    assert [texts[s].origin for s in SPLITS] == ["source", "source", "carved"]
    stats = tokenize(make_cfg(source=f"hf-disk:{saved}", seq_len=16), tmp_path / "out")
    assert all(stats["splits"][s]["blocks"] >= 1 for s in SPLITS)


def test_hf_source_with_a_config_name(tmp_path, make_cfg, make_lines):
    """`hf:<dataset>:<config>` as for `hf:Salesforce/wikitext:wikitext-103-raw-v1`: a local
    dataset dir whose README declares configs (the hub layout of WikiText) and a config name."""
    data = tmp_path / "wikitext_like"
    for config, n in (("tiny-raw", 200), ("big-raw", 400)):
        (data / config).mkdir(parents=True)
        for split in ("train", "validation", "test"):
            rows = [{"text": line + "\n"} for line in make_lines(f"{config}-{split}", n)] + [{"text": ""}]
            pq.write_table(pa.Table.from_pylist(rows), data / config / f"{split}.parquet")
    card = ["---", "configs:"]
    for config in ("tiny-raw", "big-raw"):
        card += [f"- config_name: {config}", "  data_files:"]
        card += [f"  - split: {s}\n    path: {config}/{s}.parquet" for s in SPLITS]
    (data / "README.md").write_text("\n".join(card + ["---", ""]))
    texts = read_splits(make_cfg(source=f"hf:{data}:big-raw"))
    assert [len(texts[s].documents) for s in SPLITS] == [400, 400, 400]
    assert texts["test"].documents[0] == make_lines("big-raw-test", 1)[0] + "\n"
