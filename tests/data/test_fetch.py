"""`villani fetch`: corpus, pretrained tokenizer and model into the Hugging Face cache; with
everything cached it works offline, and the stages after it need no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import villani
from tests.conftest import REPO
from tests.data.conftest import parquet_bytes
from villani.data import tokenize
from villani.data.fetch import (
    describe,
    fetch,
    fetch_model,
    fetch_tokenizer,
    write_record,
)
from villani.data.tokenizer import EOS_TOKEN, train_bpe
from villani.plan.config import load_params

SPLITS = ("train", "validation", "test")


@pytest.fixture
def pretrained(tmp_path, make_lines) -> Path:
    """A tiny GPT-Neo with its tokenizer, as `save_pretrained` writes them (a hub repo's files)."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path / "gpt-neo-tiny"
    tok = PreTrainedTokenizerFast(tokenizer_object=train_bpe(make_lines("pre", 300), 300),
                                  eos_token=EOS_TOKEN, bos_token=EOS_TOKEN)
    tok.save_pretrained(folder)
    eos = tok.eos_token_id
    config = GPTNeoConfig(vocab_size=len(tok), hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                          max_position_embeddings=512, window_size=8, attention_types=[[["global", "local"], 1]],
                          eos_token_id=eos, bos_token_id=eos)
    GPTNeoForCausalLM(config).save_pretrained(folder)
    return folder


def run_cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    """`villani ...` in a fresh process with HF_HUB_OFFLINE=1 and HF_HOME in tmp_path."""
    env = dict(os.environ, PYTHONPATH=str(Path(villani.__file__).parents[1]), HF_HOME=str(tmp_path / "hf-home"),
               HF_HUB_OFFLINE="1")
    env.pop("HF_HUB_CACHE", None)
    env.pop("HF_DATASETS_CACHE", None)
    return subprocess.run([sys.executable, "-m", "villani.cli", *args], check=False, capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)


@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_fetch_of_local_sources_runs_offline_and_reports_local(tmp_path, pretrained, make_lines):
    data = tmp_path / "corpus"
    data.mkdir()
    for split in SPLITS:
        pq.write_table(pa.table({"sentence": make_lines(split, 40)}), data / f"{split}.parquet")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "data": {"name": "local", "source": f"hf:{data}", "text_column": "sentence",
                 "tokenizer": {"kind": "pretrained", "name": str(pretrained)}, "seq_len": 16},
        "model": {"init": "pretrained", "name": str(pretrained)},
    }))
    done = run_cli(["fetch", "--params", str(params), "--results", "results"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "HF_HUB_OFFLINE=1" in out[0] and str(tmp_path / "hf-home" / "hub") in out[0]
    assert out[1] == f"corpus    hf:{data}: local {data}; train 40 rows, validation 40 rows, test 40 rows"
    assert out[2] == f"tokenizer {pretrained}: local {pretrained}"
    assert out[3] == f"model     {pretrained} (config and weights): local {pretrained}"
    assert out[4] == "wrote results/fetch/local.json"
    record = json.loads((tmp_path / "results" / "fetch" / "local.json").read_text())
    assert record["corpus"] == {"source": f"hf:{data}", "revision": None, "commit": None, "where": "local",
                                "rows": {"train": 40, "validation": 40, "test": 40}}
    assert record["model"] == {"name": str(pretrained), "revision": None, "init": "pretrained", "commit": None,
                               "where": "local"}


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_fetch_offline_without_the_dataset_in_the_cache_is_one_line_telling_to_fetch(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"data": {"name": "wt", "source": "hf:Salesforce/wikitext:wikitext-103-raw-v1",
                                               "revision": "b08601e04326c79dfdd32d625aee71d232d685c3"}}))
    done = run_cli(["fetch", "--params", str(params)], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "villani: error: data.source: dataset 'Salesforce/wikitext' at revision "
        "'b08601e04326c79dfdd32d625aee71d232d685c3' is not in the Hugging Face cache ")
    assert "HF_HUB_OFFLINE=1: run `villani fetch`" in lines[0] and "on a machine with internet" in lines[0]


def test_fetch_of_the_ptb_preset_from_the_cache_then_tokenize_offline(hub_cache, pretrained, tmp_path, make_lines):
    """configs/ptb.yaml as it is (hub corpus at a branch, hub tokenizer and model), with the
    cache holding what fetch downloads: fetch reports the commits, tokenize runs offline."""
    rows = {"train": make_lines("tr", 400), "validation": make_lines("va", 60), "test": make_lines("te", 60)}
    corpus = hub_cache.add("ptb-text-only/ptb_text_only",
                           {f"penn_treebank/{s}/0000.parquet": parquet_bytes("sentence", r) for s, r in rows.items()},
                           revision="refs/convert/parquet")
    p = load_params([REPO / "configs" / "ptb.yaml"])
    assert p["model"]["revision"] == p["data"]["tokenizer"]["revision"]  # pinned commits
    model = hub_cache.add_folder("EleutherAI/gpt-neo-125m", pretrained, revision=p["model"]["revision"])

    record = fetch(p)
    assert record["corpus"] == {"source": "hf:ptb-text-only/ptb_text_only", "revision": "refs/convert/parquet",
                                "commit": corpus, "where": "hub",
                                "location": str(hub_cache.root / "datasets--ptb-text-only--ptb_text_only"
                                                / "snapshots" / corpus),
                                "rows": {"train": 400, "validation": 60, "test": 60}}
    for item in ("tokenizer", "model"):
        assert record[item]["name"] == "EleutherAI/gpt-neo-125m" and record[item]["commit"] == model
        assert record[item]["where"] == "hub" and record[item]["location"].endswith(f"snapshots/{model}")
    assert record["model"]["init"] == "pretrained"
    lines = describe(record)
    assert lines[1].startswith(
        f"corpus    hf:ptb-text-only/ptb_text_only revision refs/convert/parquet: commit {corpus}")
    assert lines[3].startswith(f"model     EleutherAI/gpt-neo-125m (config and weights): commit {model}")
    write_record(record, tmp_path / "fetch.json")
    assert "location" not in (tmp_path / "fetch.json").read_text()

    stats = tokenize(dict(p["data"], seq_len=16), tmp_path / "out")
    assert stats["source_commit"] == corpus and stats["tokenizer_name"] == "EleutherAI/gpt-neo-125m"
    assert stats["tokenizer_revision"] == model
    assert [stats["splits"][s]["documents"] for s in SPLITS] == [400, 60, 60]


def test_pretrained_tokenizer_or_model_not_in_the_cache_tells_to_fetch(hub_cache, make_cfg):
    cfg = make_cfg(tokenizer={"kind": "pretrained", "name": "EleutherAI/gpt-neo-125m"})
    with pytest.raises(ValueError, match=r"^data\.tokenizer\.name: tokenizer 'EleutherAI/gpt-neo-125m' is not in "
                                         r"the Hugging Face cache .*run `villani fetch`"):
        fetch_tokenizer(cfg)
    with pytest.raises(ValueError, match=r"^data\.tokenizer\.name: tokenizer .* run `villani fetch`"):
        tokenize(cfg, hub_cache.root.parent / "out")  # the data stage says the same
    with pytest.raises(ValueError, match=r"^model\.name: model 'EleutherAI/gpt-neo-125m' is not in the Hugging "
                                         r"Face cache .*run `villani fetch`"):
        fetch_model({"init": "scratch", "name": "EleutherAI/gpt-neo-125m"})
    assert fetch_model({"init": "scratch", "name": None}) is None
    assert fetch_tokenizer(make_cfg()) is None  # a trained BPE needs nothing
