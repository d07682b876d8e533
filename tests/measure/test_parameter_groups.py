"""Parameter groups of every supported family: complete, a partition of θ, GPT-Neo unchanged."""

import re

import numpy as np
import pytest

from villani.curvature import ModelHessian, hutchinson
from villani.measure.parameter_groups import FAMILIES, group_columns, parameter_group

from ..curvature.cases import FAMILIES as TINY
from ..curvature.cases import tiny_causal_lm, token_batches

FUSED_QKV = {"gpt2", "gpt_neox"}


def _trainable(model) -> list[str]:
    return [n for n, p in model.named_parameters() if p.requires_grad]


@pytest.mark.parametrize("family", list(TINY))
def test_every_parameter_has_a_group_and_groups_partition_theta(family):
    model = tiny_causal_lm(family)
    model_type = model.config.model_type
    assert model_type in FAMILIES
    names = _trainable(model)
    groups = group_columns(names, model_type)
    assert "other" not in groups, [names[j] for j in groups.get("other", [])]
    assert sorted(j for cols in groups.values() for j in cols) == list(range(len(names)))
    sizes = dict(model.named_parameters())
    assert sum(sizes[names[j]].numel() for cols in groups.values() for j in cols) == sum(
        p.numel() for p in {id(p): p for p in model.parameters()}.values())
    layers = model.config.num_hidden_layers
    parts = ("qkv", "out", "mlp", "layernorm") if model_type in FUSED_QKV else ("q", "k", "v", "out", "mlp", "layernorm")
    expected = {"embeddings", "final.layernorm"} | {f"layer{i}.{p}" for i in range(layers) for p in parts}
    assert set(groups) == expected


def test_group_traces_sum_to_the_trace():
    """The partition in the flat vector: per-group sums of the per-tensor samples add up to
    every Hutchinson sample (Llama with tied embeddings and grouped KV heads)."""
    model = tiny_causal_lm("llama_tied_gqa")
    op = ModelHessian(model, token_batches())
    est = hutchinson(op, 3, seed=0, blocks=op.param_blocks())
    groups = group_columns(list(est.block_names), model.config.model_type)
    by_group = np.stack([est.block_samples[:, cols].sum(axis=1) for cols in groups.values()], axis=1)
    np.testing.assert_allclose(by_group.sum(axis=1), est.samples, rtol=1e-12)


def test_gpt_neo_groups():
    """The GPT-Neo groups of SPEC §2, including names of other nestings and unknown tensors."""
    expected = {
        "transformer.wte.weight": "embeddings", "transformer.wpe.weight": "embeddings", "lm_head.weight": "embeddings",
        "wte.weight": "embeddings", "transformer.h.0.ln_1.weight": "layer0.layernorm",
        "transformer.h.0.attn.attention.k_proj.weight": "layer0.k", "transformer.h.0.attn.attention.v_proj.weight": "layer0.v",
        "transformer.h.0.attn.attention.q_proj.weight": "layer0.q",
        "transformer.h.1.attn.attention.out_proj.bias": "layer1.out", "transformer.h.1.mlp.c_proj.bias": "layer1.mlp",
        "transformer.ln_f.bias": "final.layernorm", "encoder.ln_f.weight": "final.layernorm",
        "transformer.h.12.ln_2.bias": "layer12.layernorm", "h.1.mlp.c_fc.weight": "layer1.mlp",
        "transformer.h.3.attn.attention.bias": "other", "transformer.h.0.foo.weight": "other", "other.thing": "other",
    }
    for n, g in expected.items():
        assert parameter_group(n, "gpt_neo") == g, n
    names = list(expected)
    cols = group_columns(names, "gpt_neo")
    assert sorted(j for js in cols.values() for j in js) == list(range(len(names)))
    assert list(cols) == list(dict.fromkeys(expected.values()))  # groups in order of first appearance


def test_family_specific_names():
    assert parameter_group("transformer.h.2.attn.c_proj.weight", "gpt2") == "layer2.out"
    assert parameter_group("transformer.h.2.mlp.c_proj.weight", "gpt2") == "layer2.mlp"
    assert parameter_group("gpt_neox.layers.1.attention.dense.bias", "gpt_neox") == "layer1.out"
    assert parameter_group("gpt_neox.layers.1.mlp.dense_4h_to_h.bias", "gpt_neox") == "layer1.mlp"
    assert parameter_group("embed_out.weight", "gpt_neox") == "embeddings"
    assert parameter_group("model.layers.0.mlp.gate_proj.weight", "llama") == "layer0.mlp"
    assert parameter_group("model.norm.weight", "llama") == "final.layernorm"
    assert parameter_group("model.layers.0.input_layernorm.weight", "llama") == "layer0.layernorm"


def test_unknown_family_is_a_one_line_error():
    with pytest.raises(ValueError, match=re.escape("model_type 'bert': parameter groups are defined for")):
        parameter_group("x.weight", "bert")
