"""Hub datasets read from the Hugging Face cache: the presets' exact sources and revisions,
offline, with the cache laid out as `villani fetch` leaves it (see conftest.HubCache)."""

from __future__ import annotations

import shutil

import pytest
from huggingface_hub.utils import filter_repo_objects

from tests.conftest import REPO
from tests.data.conftest import parquet_bytes
from villani.data import tokenize
from villani.data.sources import (
    _card_configs,
    _config_patterns,
    open_source,
    read_splits,
)
from villani.plan.config import load_params

SPLITS = ("train", "validation", "test")


def preset_data(name: str, **overrides) -> dict:
    data = load_params([REPO / "configs" / name])["data"].to_dict()
    data.update(overrides)
    return data


def test_ptb_preset_source_reads_the_parquet_conversion_branch(hub_cache, make_lines):
    """configs/ptb.yaml: hf:ptb-text-only/ptb_text_only at refs/convert/parquet, whose
    layout is <config>/<split>/0000.parquet (no dataset card): the splits come from the
    folder names; the branch resolves through refs/ to the commit, offline."""
    rows = {"train": make_lines("tr", 300), "validation": make_lines("va", 40), "test": make_lines("te", 50)}
    files = {f"penn_treebank/{s}/0000.parquet": parquet_bytes("sentence", r) for s, r in rows.items()}
    files["penn_treebank/train/index.duckdb"] = b"not data"  # the branch once held search indexes
    commit = hub_cache.add("ptb-text-only/ptb_text_only", files, revision="refs/convert/parquet")
    data = preset_data("ptb.yaml", tokenizer={"kind": "bpe", "vocab_size": 300}, seq_len=16)
    assert (data["source"], data["revision"]) == ("hf:ptb-text-only/ptb_text_only", "refs/convert/parquet")

    source = open_source(data)
    assert source.commit == commit and source.location.endswith(f"snapshots/{commit}")
    texts = read_splits(data, source)
    assert [texts[s].documents for s in SPLITS] == [rows[s] for s in SPLITS]
    assert all(texts[s].origin == "source" for s in SPLITS)


def test_wikitext_preset_source_reads_its_config_at_the_pinned_commit(hub_cache, tmp_path, make_lines):
    """configs/wikitext103.yaml: a commit revision needs no refs/; the card's configs name
    the files; only the files of the requested (and first) config are in the cache, as
    fetch downloads them."""
    configs = ("wikitext-103-raw-v1", "wikitext-103-v1", "wikitext-2-raw-v1")
    card = ["---", "configs:"]
    full = {}
    for config in configs:
        card += [f"- config_name: {config}", "  data_files:"]
        for split in SPLITS:
            card += [f"  - split: {split}", f"    path: {config}/{split}-*"]
            rows = [""] + [line + "\n" for line in make_lines(f"{config}-{split}", 60)]
            full[f"{config}/{split}-00000-of-00001.parquet"] = parquet_bytes("text", rows)
    full["README.md"] = "\n".join(card + ["---", "# WikiText", ""]).encode()
    data = preset_data("wikitext103.yaml", tokenizer={"kind": "bpe", "vocab_size": 300}, seq_len=16)

    # the files fetch downloads: the card, then what the card's patterns select
    readme = tmp_path / "README.md"
    readme.write_bytes(full["README.md"])
    configs = _card_configs(readme, data["source"])
    patterns = _config_patterns(configs, "wikitext-2-raw-v1", data["source"])
    picked = sorted(filter_repo_objects(full, allow_patterns=patterns))  # snapshot_download's filter
    assert picked == ["README.md"] + sorted(f"{c}/{s}-00000-of-00001.parquet"
                                             for c in ("wikitext-103-raw-v1", "wikitext-2-raw-v1") for s in SPLITS)
    patterns = _config_patterns(configs, "wikitext-103-raw-v1", data["source"])
    picked = sorted(filter_repo_objects(full, allow_patterns=patterns))
    assert picked == ["README.md"] + sorted(f"wikitext-103-raw-v1/{s}-00000-of-00001.parquet" for s in SPLITS)

    commit = hub_cache.add("Salesforce/wikitext", {f: full[f] for f in picked}, revision=data["revision"])
    assert commit == "b08601e04326c79dfdd32d625aee71d232d685c3"
    texts = read_splits(data)
    assert [len(texts[s].documents) for s in SPLITS] == [60, 60, 60]
    assert texts["test"].documents[0] == make_lines("wikitext-103-raw-v1-test", 1)[0] + "\n"
    stats = tokenize(data, tmp_path / "out")
    assert stats["source"] == "hf:Salesforce/wikitext:wikitext-103-raw-v1"
    assert stats["revision"] == stats["source_commit"] == commit


def test_card_patterns_follow_data_dir_path_lists_and_recursive_globs(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("""---
configs:
- config_name: first
  data_files: first.jsonl
- config_name: deep
  data_dir: corpora/deep
  data_files:
  - split: train
    path: ["**/train-*.parquet", extra/train.csv]
  - split: test
    path: "**/test-*.parquet"
- config_name: bare
  data_dir: bare
---
""")
    files = ["README.md", "first.jsonl", "other.jsonl", "corpora/deep/train-0.parquet",
             "corpora/deep/x/train-1.parquet",
             "corpora/deep/x/test-0.parquet", "corpora/deep/extra/train.csv", "corpora/train-9.parquet",
             "bare/a.txt", "bare/b/c.txt"]
    configs = _card_configs(readme, "hf:x")
    assert sorted(filter_repo_objects(files, allow_patterns=_config_patterns(configs, "deep", "hf:x"))) == [
        "README.md", "corpora/deep/extra/train.csv", "corpora/deep/train-0.parquet",
        "corpora/deep/x/test-0.parquet", "corpora/deep/x/train-1.parquet", "first.jsonl"]
    assert sorted(filter_repo_objects(files, allow_patterns=_config_patterns(configs, "bare", "hf:x"))) == [
        "README.md", "bare/a.txt", "bare/b/c.txt", "first.jsonl"]
    every = set(filter_repo_objects(files, allow_patterns=_config_patterns(configs, None, "hf:x")))
    assert set(files) - every == {"other.jsonl", "corpora/train-9.parquet"}
    with pytest.raises(ValueError, match=r"^data\.source: hf:x: no config 'nope' \(configs: first, deep, bare\)$"):
        _config_patterns(configs, "nope", "hf:x")


def test_a_script_dataset_on_the_hub_names_its_data_only_copy(hub_cache, make_cfg):
    """hf:ptb_text_only at main is the loading script the old preset read."""
    hub_cache.add("ptb_text_only", {"ptb_text_only.py": b"import datasets\n", "README.md": b"# PTB\n"})
    with pytest.raises(ValueError) as err:
        open_source(make_cfg(source="hf:ptb_text_only", text_column="sentence"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("data.source: hf:ptb_text_only is a dataset loading script")
    assert "hf:ptb-text-only/ptb_text_only with data.revision: refs/convert/parquet" in msg


def test_a_dataset_or_revision_not_in_the_cache_tells_to_run_fetch(hub_cache, make_cfg, make_lines):
    pattern = (r"^data\.source: dataset 'someone/corpus'{} is not in the Hugging Face cache .* and "
               r"HF_HUB_OFFLINE=1: run `villani fetch` with the same parameters and HF_HOME on a machine with internet")
    with pytest.raises(ValueError, match=pattern.format("")):
        open_source(make_cfg(source="hf:someone/corpus"))
    hub_cache.add("someone/corpus", {"train.parquet": parquet_bytes("text", make_lines("t", 30))})
    assert len(open_source(make_cfg(source="hf:someone/corpus")).documents["train"]) == 30
    with pytest.raises(ValueError, match=pattern.format(" at revision 'v2'")):
        open_source(make_cfg(source="hf:someone/corpus", revision="v2"))
    # a ref whose snapshot folder is gone (a cache cleaned by hand)
    commit = hub_cache.add("someone/corpus", {"train.parquet": parquet_bytes("text", make_lines("t", 30))},
                           revision="v3")
    shutil.rmtree(hub_cache.root / "datasets--someone--corpus" / "snapshots" / commit)
    with pytest.raises(ValueError, match=pattern.format(" at revision 'v3'")):
        open_source(make_cfg(source="hf:someone/corpus", revision="v3"))
