"""Untrusted files: no pickle code execution, no remote code, foreign checkpoints rejected."""

from __future__ import annotations

import ast
import pickle

import pytest
import torch

from tests.conftest import REPO

SRC = REPO / "src" / "villani"


def _calls():
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                yield path, node


def _kw(node: ast.Call, name: str):
    for k in node.keywords:
        if k.arg == name:
            return k.value
    return None


def test_every_torch_load_is_weights_only():
    found = 0
    for path, node in _calls():
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "load" and isinstance(f.value, ast.Name) and f.value.id == "torch":
            found += 1
            v = _kw(node, "weights_only")
            assert isinstance(v, ast.Constant) and v.value is True, f"{path}:{node.lineno} torch.load without weights_only=True"
    assert found >= 1


def test_remote_code_is_never_trusted():
    pretrained = 0
    for path, node in _calls():
        v = _kw(node, "trust_remote_code")
        if v is not None:
            assert isinstance(v, ast.Constant) and v.value is False, f"{path}:{node.lineno} trust_remote_code not False"
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "from_pretrained":
            pretrained += 1
            assert v is not None, f"{path}:{node.lineno} from_pretrained without trust_remote_code=False"
    assert pretrained >= 3


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, (f"touch {_Payload.marker}",))


def test_malicious_pickle_state_is_refused_without_running(tmp_path):
    from villani.training.checkpoint import load_state_file

    _Payload.marker = tmp_path / "pwned"
    evil = tmp_path / "step0000012.state.pt"
    with open(evil, "wb") as f:
        pickle.dump({"optimizer": _Payload()}, f)
    with pytest.raises(ValueError, match="corrupt or truncated training state"):
        load_state_file(evil)
    assert not _Payload.marker.exists(), "the pickle payload ran"


def test_pretrained_gpt_neo_from_a_local_folder(tmp_path):
    """The `init: pretrained` path on local files: from_pretrained, eager attention, same weights."""
    from transformers import GPTNeoConfig, GPTNeoForCausalLM

    from villani.model.causal_lm import build_model

    cfg = GPTNeoConfig(vocab_size=300, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
                       window_size=16, attention_types=[[["global", "local"], 1]], max_position_embeddings=32)
    torch.manual_seed(3)
    ref = GPTNeoForCausalLM._from_config(cfg, attn_implementation="eager")
    ref.save_pretrained(tmp_path / "neo")
    model = build_model({"init": "pretrained", "name": str(tmp_path / "neo"), "config": {}, "dropout": 0.0},
                        300, 32, seed=0)
    assert model.config._attn_implementation == "eager"
    for (n, a), (_, b) in zip(ref.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), n
    # a tokenizer larger than the model's vocabulary is refused with the key named
    with pytest.raises(ValueError, match="model.name: .* vocab_size 300 < tokenizer's 400"):
        build_model({"init": "pretrained", "name": str(tmp_path / "neo"), "config": {}, "dropout": 0.0},
                    400, 32, seed=0)
