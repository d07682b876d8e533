"""The stages on families other than GPT-Neo: a tiny Llama (RMSNorm, rotary, SwiGLU, tied
embeddings, grouped KV heads) and a tiny GPT-2 (Conv1D, tied) built from ``model.config``,
trained, checkpointed, reloaded, measured, and put through the rays and the landscape.

The parameter sets give the whole ``model.config`` (a family's keys replace GPT-Neo's: a
merged file would keep GPT-Neo's ``window_size``, which is refused, tested below)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO, TINY
from tests.measure.conftest import MICRO

FAMILIES = {
    "llama": {"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 12, "tie_word_embeddings": True},
    "gpt2": {"model_type": "gpt2", "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2},
}
# every parameter group of each family's layer 0 (the fused qkv of GPT-2 is one group)
LAYER0_GROUPS = {"llama": {"layer0.q", "layer0.k", "layer0.v", "layer0.out", "layer0.mlp", "layer0.layernorm"},
                 "gpt2": {"layer0.qkv", "layer0.out", "layer0.mlp", "layer0.layernorm"}}


def family_params(family: str, **overrides) -> dict:
    """params.yaml + tiny.yaml + the micro overlay, with ``model.config`` replaced by the family's."""
    from villani.plan.config import deep_merge, read_yaml, resolve

    doc = deep_merge(deep_merge(read_yaml(REPO / "params.yaml"), read_yaml(TINY)), MICRO)
    doc = deep_merge(doc, {"train": {"lambdas": [0.01]}, "rays": {"count": 1, "points": 3, "fit_points": 2,
                                                                   "lambdas": [0.0, 0.01]},
                           "landscape": {"lambdas": [0.01], "grid": 3}, **overrides})
    doc["model"]["config"] = dict(FAMILIES[family])
    return resolve(doc, source=family)


@pytest.fixture(scope="module")
def micro_data(tmp_path_factory):
    from villani.data import tokenize
    from villani.plan import layout

    p = family_params("llama")
    root = tmp_path_factory.mktemp("families-data")
    tokenize(p["data"], layout.fmt(layout.DATA_DIR, root, dataset=p["data"]["name"]))
    return root


def test_a_family_key_left_from_gpt_neo_is_refused(micro_data):
    from villani.model.causal_lm import model_for_run

    p = family_params("llama").to_dict()  # a family key the schema cannot know: not resolved again
    p["model"]["config"]["window_size"] = 8
    with pytest.raises(ValueError, match=r"^model\.config\.window_size: not a parameter of llama models"):
        model_for_run(p, micro_data, 0)


@pytest.mark.parametrize("family", ["mistral", "qwen2", "gemma"])
def test_llama_like_families_have_llama_groups(family):
    from transformers import AutoConfig, AutoModelForCausalLM

    from villani.measure.parameter_groups import group_columns

    cfg = AutoConfig.for_model(family, vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                               num_key_value_heads=1, intermediate_size=12, head_dim=4)
    names = [n for n, _ in AutoModelForCausalLM.from_config(cfg).named_parameters()]
    assert set(group_columns(names, family)) == {"embeddings", "final.layernorm"} | LAYER0_GROUPS["llama"]


def test_no_bias_norm_leaves_out_rmsnorm_gains(micro_data):
    from villani.model.causal_lm import model_for_run
    from villani.training.optim import decayed_parameter_names

    model = model_for_run(family_params("llama"), micro_data, 0)
    decayed = set(decayed_parameter_names(model, "no_bias_norm"))
    norms = {n for n, _ in model.named_parameters() if "norm" in n}
    assert norms and not norms & decayed
    assert decayed == {n for n, _ in model.named_parameters()} - norms  # Llama has no biases


def test_gpt2_conv1d_directions_are_normalised_per_output_unit(micro_data):
    from villani.measure.landscape import filter_normalized_direction, output_unit_dims
    from villani.model.causal_lm import model_for_run

    model = model_for_run(family_params("gpt2"), micro_data, 0)
    units = output_unit_dims(model)
    assert units and all(".c_attn." in n or ".c_proj." in n or ".c_fc." in n for n in units)
    theta0 = {n: q.detach().clone() for n, q in model.named_parameters()}
    d = filter_normalized_direction(theta0, torch.Generator().manual_seed(3), units)
    w = theta0["transformer.h.0.attn.c_attn.weight"]  # Conv1D: (in, out) = (8, 24)
    assert w.shape == (8, 24)
    got = d["transformer.h.0.attn.c_attn.weight"].double()
    np.testing.assert_allclose(got.norm(dim=0), w.double().norm(dim=0), rtol=1e-5)  # per output column
    assert not np.allclose(got.norm(dim=1), w.double().norm(dim=1), rtol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_train_measure_rays_landscape(family, micro_data, tmp_path):
    from villani.measure import measure_checkpoint
    from villani.measure.landscape import run_landscape
    from villani.measure.rays import run_rays
    from villani.model.causal_lm import model_for_run
    from villani.plan import layout
    from villani.plan.runs import Run
    from villani.training import train_segment
    from villani.training.checkpoint import load_run_model

    torch.set_num_threads(1)
    p = family_params(family)
    ds = p["data"]["name"]
    shutil.copytree(layout.fmt(layout.DATA_DIR, micro_data, dataset=ds),
                    layout.fmt(layout.DATA_DIR, tmp_path, dataset=ds))
    manifest = train_segment(p, variant="adamw", lam=0.01, seed=0, end=12, root=tmp_path, device="cpu", progress=False)
    assert [c["step"] for c in manifest["checkpoints"]][-1] == 12

    model, meta = load_run_model(p, tmp_path, Run(ds, "adamw", 0.01, 0), 12, "cpu")
    assert model.config.model_type == family and meta["d"] == sum(q.numel() for q in model.parameters())
    if model.config.tie_word_embeddings:  # stored once, tied again on load
        assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    fresh = model_for_run(p, tmp_path, 0)
    assert any(not torch.equal(a, b) for a, b in zip(fresh.parameters(), model.parameters()))  # trained weights loaded

    rec = json.loads(Path(measure_checkpoint(p, variant="adamw", lam=0.01, seed=0, step=12, root=tmp_path,
                                             device="cpu")).read_text())
    assert rec["d"] == meta["d"] and rec["trace_L"]["num_probes"] == p["measure"]["num_probes"]
    groups = rec["block_traces"]
    assert LAYER0_GROUPS[family] <= set(groups) and "other" not in groups
    np.testing.assert_allclose(sum(groups.values()), rec["trace_L"]["mean"], rtol=1e-6)
    assert np.isfinite(rec["psi_s"]["1.0"]) and len(rec["top_eigenvalues"]) == p["measure"]["top_k"]

    slopes = json.loads((Path(run_rays(p, tmp_path, "cpu")) / "slopes.json").read_text())
    assert slopes["model"]["model_type"] == family and slopes["model"]["d"] == rec["d"]
    surface = json.loads((Path(run_landscape(p, 0.01, tmp_path, "cpu")) / "surface.json").read_text())
    assert surface["d"] == rec["d"] and all(np.isfinite(c["F_center"]) for c in surface["centres"])
