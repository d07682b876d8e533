"""Bad sources are one-line ValueErrors naming data.source (or the key at fault), what is
wrong and the fix — through the real datasets code path, on local directories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import villani
from villani.data import tokenize
from villani.data.sources import open_source

SCRIPT = '''import datasets

class PennTreebank(datasets.GeneratorBasedBuilder):
    """A loading script, as the hub's ptb_text_only has one."""
'''


def one_line_error(cfg: dict, match: str) -> str:
    with pytest.raises(ValueError, match=match) as err:
        open_source(cfg)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def write_splits(folder: Path, column: str, rows: dict[str, list]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, values in rows.items():
        pq.write_table(pa.table({column: values}), folder / f"{split}.parquet")
    return folder


def test_a_dataset_loading_script_is_refused_with_the_data_only_source_to_use(tmp_path, make_cfg, make_lines):
    """A folder with `<name>.py` is a script dataset, which datasets >= 4 no longer runs
    (it raises RuntimeError, which would be a traceback): the error names the script and,
    for PTB, the data-only copy on the hub."""
    ptb = tmp_path / "ptb_text_only"
    write_splits(ptb, "sentence", {"train": make_lines("t", 50)})
    (ptb / "ptb_text_only.py").write_text(SCRIPT)
    import datasets

    with pytest.raises(RuntimeError, match="scripts are no longer supported"):
        datasets.load_dataset(str(ptb))  # what the CLI would show as a traceback
    msg = one_line_error(make_cfg(source=f"hf:{ptb}", text_column="sentence"), r"^data\.source: ")
    assert "loading script (ptb_text_only.py)" in msg and "no longer runs" in msg
    assert "hf:ptb-text-only/ptb_text_only with data.revision: refs/convert/parquet" in msg

    own = tmp_path / "my_corpus"
    write_splits(own, "text", {"train": make_lines("t", 50)})
    (own / "my_corpus.py").write_text(SCRIPT)
    msg = one_line_error(make_cfg(source=f"hf:{own}"), r"^data\.source: ")
    assert "(my_corpus.py)" in msg and "convert it to data files" in msg and "source files" in msg


def test_a_file_is_no_dataset_directory(tmp_path, make_cfg):
    (tmp_path / "loader.py").write_text(SCRIPT)
    one_line_error(make_cfg(source=f"hf:{tmp_path / 'loader.py'}"), r"^data\.source: .* is a file; hf: takes")


def test_missing_train_split_column_config_and_empty_split(tmp_path, make_cfg, make_lines):
    import datasets

    only_eval = write_splits(tmp_path / "eval_only", "text",
                             {"validation": make_lines("v", 20), "test": make_lines("t", 20)})
    msg = one_line_error(make_cfg(source=f"hf:{only_eval}"), r"^data\.source: .* has no train split \(splits: ")
    assert "validation, test" in msg

    ptb_like = write_splits(tmp_path / "ptb_like", "sentence", {"train": make_lines("t", 20)})
    one_line_error(make_cfg(source=f"hf:{ptb_like}"),
                   r"^data\.text_column: .* has no column 'text' \(columns: sentence\); set data\.text_column")

    numbers = tmp_path / "numbers"
    numbers.mkdir()
    pq.write_table(pa.table({"text": list(range(20))}), numbers / "train.parquet")
    one_line_error(make_cfg(source=f"hf:{numbers}"), r"^data\.text_column: .* column 'text' holds .*int64.*, not text")

    blank_val = write_splits(tmp_path / "blank_val", "text",
                             {"train": make_lines("t", 20), "validation": ["", "  ", "\n"]})
    one_line_error(make_cfg(source=f"hf:{blank_val}"), r"^data\.source: .* split 'validation' has no text")
    empty_val = tmp_path / "empty_val"
    write_splits(empty_val, "text", {"train": make_lines("t", 20)})
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty_val / "validation.parquet")
    # datasets 5.2 builds no zero-row split (Parquet: ArrowInvalid; CSV: "corresponds to no
    # data"; load_from_disk: IndexError): its error and the cause, in one line
    one_line_error(make_cfg(source=f"hf:{empty_val}"), r"^data\.source: .*datasets cannot load it: .* \(\w+: ")
    no_rows = tmp_path / "no_rows"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": make_lines("t", 20)}),
                          "test": datasets.Dataset.from_dict({"text": []})}).save_to_disk(str(no_rows))
    one_line_error(make_cfg(source=f"hf-disk:{no_rows}"), r"^data\.source: hf-disk:.*: datasets cannot load it: ")
    (tmp_path / "blank.txt").write_text(" \n\n")
    one_line_error(make_cfg(source="files", files={"train": str(tmp_path / "blank.txt")}),
                   r"^data\.source: files split 'train' has no text")


def test_config_names_and_revisions(tmp_path, make_cfg, make_lines):
    card = tmp_path / "carded"
    write_splits(card / "a", "text", {"train": make_lines("a", 20)})
    (card / "README.md").write_text("---\nconfigs:\n- config_name: a\n  data_files: a/train.parquet\n---\n")
    assert len(open_source(make_cfg(source=f"hf:{card}:a")).documents["train"]) == 20
    one_line_error(make_cfg(source=f"hf:{card}:b"), r"^data\.source: hf:.*carded:b: no config 'b' \(configs: a\)")

    plain = write_splits(tmp_path / "plain", "text", {"train": make_lines("t", 20)})
    one_line_error(make_cfg(source=f"hf:{plain}:nope"), r"^data\.source: .*datasets cannot load it: .*'nope'")
    one_line_error(make_cfg(source=f"hf:{plain}", revision="main"),
                   r"^data\.revision: 'main' given, but hf:.* is a local directory .*set data\.revision: null")
    one_line_error(make_cfg(source="builtin:pydoc", revision="main"),
                   r"^data\.revision: 'main' is only for hub datasets")
    one_line_error(make_cfg(source=f"hf:{tmp_path}/../x y"), r"^data\.source: .* neither a local directory nor a hub")


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_tokenize_cli_prints_one_line_and_exits_2_for_a_script_dataset(tmp_path, make_lines):
    """The user-facing path: `villani tokenize` in a fresh process, as a SLURM job runs it."""
    ptb = write_splits(tmp_path / "ptb_text_only", "sentence", {"train": make_lines("t", 50)})
    (ptb / "ptb_text_only.py").write_text(SCRIPT)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"data": {"name": "ptb", "source": f"hf:{ptb}", "text_column": "sentence"}}))
    env = dict(os.environ, PYTHONPATH=str(Path(villani.__file__).parents[1]), HF_HOME=str(tmp_path / "hf"),
               HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-m", "villani.cli", "tokenize", "--params", str(params),
                           "--results", str(tmp_path / "results")], check=False, capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("villani: error: data.source: hf:"), done.stderr
    assert "refs/convert/parquet" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "results" / "data" / "ptb").exists()


def test_tokenize_records_revision_and_commit_of_a_local_source(tmp_path, make_cfg, make_lines):
    data = write_splits(tmp_path / "local", "text", {s: make_lines(s, 80) for s in ("train", "validation", "test")})
    stats = tokenize(make_cfg(source=f"hf:{data}", seq_len=16), tmp_path / "out")
    assert stats["revision"] is None and stats["source_commit"] is None


@pytest.mark.parametrize("content, fragment", [
    ("caf\u00e9 au lait\n".encode("latin-1"), "is not UTF-8 text (byte 0xe9 at offset 3, line 1"),
    (b"text\n" + bytes(range(256)), "is not UTF-8 text (byte 0x80"),
    (b"PK\x03\x04\x00\x00\x00", "holds NUL bytes"),
])
def test_a_latin1_or_binary_file_names_the_file_and_split(tmp_path, make_cfg, make_lines, content, fragment):
    good = tmp_path / "train.txt"
    good.write_text("\n".join(make_lines("t", 20)))
    bad = tmp_path / "valid.bin"
    bad.write_bytes(content)
    msg = one_line_error(make_cfg(source="files", files={"train": str(good), "validation": str(bad)}),
                         r"^data\.files\.validation: ")
    assert str(bad) in msg and fragment in msg, msg
