"""Checkpoints in the Hugging Face layout.

A checkpoint folder opens with ``AutoModelForCausalLM.from_pretrained`` and gives the
loss our verified loader gives; a checkpoint of the old flat layout is refused in one line
naming the file and the converter, and ``villani convert-checkpoints`` turns it into a
folder that loads the same weights. With ``model.init: pretrained`` the pretrained stage
saves the named model once into ``results/pretrained/{dataset}/`` and training starts
from there without reading the name again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.runs import Run
from villani.training import train_segment
from villani.training.checkpoint import load_run_model, read_meta

RUN = Run("tiny", "adamw", 0.01, 0)
SMALL = {"lambdas": [0.01], "seeds": [0], "steps": 8, "checkpoints": {"count": 2}, "segments": 1,
         "warmup_steps": 2, "adamw_noise": {"lambdas": []},
         "adam_l2": {"lambdas": []}, "langevin": {"lambdas": []}}


def _root(tmp_path: Path, data_root: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(data_root / "data", root / "data")
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data_root):
    p = tiny_params(train=SMALL)
    root = _root(tmp_path_factory.mktemp("ckpt"), tiny_data_root)
    train_segment(p, variant="adamw", lam=0.01, seed=0, end=8, root=root, device="cpu", progress=False)
    return p, root


def _batch(p, root) -> torch.Tensor:
    from villani.data import load_blocks

    return load_blocks(layout.fmt(layout.SPLIT, root, dataset="tiny", split="validation"))[:4]


def test_a_checkpoint_is_a_folder_from_pretrained_opens_with_our_loss(trained):
    from transformers import AutoModelForCausalLM

    p, root = trained
    folder = RUN.path(layout.CKPT_DIR, root, step=8)
    assert {f.name for f in folder.iterdir()} == {"config.json", "model.safetensors", "state.pt", "checkpoint.json",
                                                  "tokenizer.json", "tokenizer_config.json", "README.md"}
    meta = read_meta(root, step=8, **RUN.wildcards)
    assert meta["config_sha256"] == sha256_file(folder / "config.json")
    ours, _ = load_run_model(p, root, RUN, 8, device="cpu")
    theirs = AutoModelForCausalLM.from_pretrained(folder).float().eval()
    assert type(theirs).__name__ == "GPTNeoForCausalLM"
    for (n, a), (m, b) in zip(sorted(ours.state_dict().items()), sorted(theirs.state_dict().items())):
        assert n == m and torch.equal(a, b), n
    x = _batch(p, root)
    with torch.no_grad():
        a, b = ours(input_ids=x, labels=x).loss, theirs(input_ids=x, labels=x).loss
    assert float(a) == pytest.approx(float(b), rel=1e-5)
    assert abs(float(a) - meta["train_loss"]) < 3.0  # a real, trained language-model loss


def _to_old_layout(root: Path, step: int) -> None:
    """Rewrite checkpoint ``step`` as the flat files of the previous layout: safetensors'
    save_model naming, ``step{t}.json`` without a config, ``step{t}.state.pt``."""
    from safetensors.torch import save_model

    p = tiny_params(train=SMALL)
    kw = dict(RUN.wildcards, step=step)
    folder = layout.fmt(layout.CKPT_DIR, root, **kw)
    old_w, old_m, old_s = (layout.fmt(x, root, **kw) for x in layout.OLD_CKPT_FILES)
    model, meta = load_run_model(p, root, RUN, step, device="cpu")
    save_model(model, str(old_w))
    meta = {k: v for k, v in meta.items() if k != "config_sha256"}
    meta["weights_sha256"] = sha256_file(old_w)
    if (folder / "state.pt").exists():
        shutil.move(folder / "state.pt", old_s)
    old_m.write_text(json.dumps(meta))
    shutil.rmtree(folder)


def test_old_flat_checkpoints_are_refused_in_one_line_then_converted(tmp_path, trained):
    from villani.cli import main

    p, trained_root = trained
    root = tmp_path / "results"
    shutil.copytree(trained_root, root)
    before = {s: read_meta(root, step=s, **RUN.wildcards) for s in (0, 4, 8)}
    for step in (0, 4, 8):
        _to_old_layout(root, step)
    old = layout.fmt(layout.OLD_CKPT_FILES[0], root, step=4, **RUN.wildcards)
    with pytest.raises(ValueError) as e:
        load_run_model(p, root, RUN, 4, device="cpu")
    assert str(e.value) == (f"{old}: checkpoint in the old flat layout; checkpoints are now Hugging Face folders "
                            "ckpt/step{t}/ — run `villani convert-checkpoints` once (or delete the run and retrain)")
    params = tmp_path / "params.yaml"
    from villani.plan.config import dump_yaml

    dump_yaml(p, params)
    assert main(["convert-checkpoints", "--params", str(params), "--results", str(root)]) == 0
    assert not list(layout.fmt(layout.RUN_DIR, root, **RUN.wildcards).glob("ckpt/step*.*"))
    for step in (0, 4, 8):
        meta = read_meta(root, step=step, **RUN.wildcards)  # verifies weights, config and state
        assert meta["theta_sq_norm"] == before[step]["theta_sq_norm"]
        assert meta["weights_sha256"] == before[step]["weights_sha256"]  # the same bytes as a fresh run's
    manifest = json.loads(RUN.path(layout.SEGMENT, root, step=8).read_text())
    assert [c["weights_sha256"] for c in manifest["checkpoints"]] == [before[s]["weights_sha256"] for s in (0, 4, 8)]
    assert main(["convert-checkpoints", "--params", str(params), "--results", str(root)]) == 0  # nothing left to do


def test_pretrained_weights_are_saved_once_and_runs_start_from_them(tmp_path, tiny_data_root, monkeypatch):
    import transformers
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    from villani.model.causal_lm import read_pretrained, write_pretrained

    cfg = GPTNeoConfig(vocab_size=320, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                       window_size=16, attention_types=[[["global", "local"], 1]], max_position_embeddings=32)
    torch.manual_seed(5)
    ref = GPTNeoForCausalLM._from_config(cfg, attn_implementation="eager")
    ref.save_pretrained(tmp_path / "neo")
    p = tiny_params(model={"init": "pretrained", "name": str(tmp_path / "neo")}, train=SMALL)
    root = _root(tmp_path, tiny_data_root)
    record = write_pretrained(p, root)
    assert record["weights_sha256"] == read_pretrained(root, "tiny")["weights_sha256"]
    assert {f.name for f in layout.fmt(layout.PRETRAINED_DIR, root, dataset="tiny").iterdir()} == {
        "config.json", "model.safetensors", "pretrained.json"}

    def no_hub(*args, **kwargs):
        raise AssertionError("a training job read model.name itself")

    monkeypatch.setattr(transformers.GPTNeoForCausalLM, "from_pretrained", no_hub)
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", no_hub)
    train_segment(p, variant="adamw", lam=0.01, seed=0, end=8, root=root, device="cpu", progress=False)
    start, _ = load_run_model(p, root, RUN, 0, device="cpu")
    for n, t in ref.state_dict().items():
        assert torch.equal(start.state_dict()[n], t), n
    # a modified pretrained file is refused before any training step
    weights = layout.fmt(layout.PRETRAINED_WEIGHTS, root, dataset="tiny")
    weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
    shutil.rmtree(layout.fmt(layout.RUN_DIR, root, **RUN.wildcards))
    with pytest.raises(ValueError, match=r"model.safetensors: sha256 does not match pretrained.json"):
        train_segment(p, variant="adamw", lam=0.01, seed=0, end=8, root=root, device="cpu", progress=False)
