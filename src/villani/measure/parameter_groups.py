"""Parameter groups for per-block traces (SPEC §2), for every supported causal-LM family.

Each trainable tensor belongs to exactly one group:

- ``embeddings``: token and position embeddings and an untied output layer;
- ``layer{i}.q``, ``layer{i}.k``, ``layer{i}.v``, ``layer{i}.out``: separate attention
  projections (GPT-Neo, Llama); ``layer{i}.qkv``, ``layer{i}.out`` where the family
  fuses query/key/value into one tensor (GPT-2 ``c_attn``, GPT-NeoX ``query_key_value``);
- ``layer{i}.mlp``: the feed-forward block (SwiGLU's gate, up and down projections included);
- ``layer{i}.layernorm``: the block's normalisations (LayerNorm or RMSNorm);
- ``final.layernorm``: the normalisation before the output layer;
- ``other``: anything else (none in the supported families).

The groups partition θ, so group traces sum to the total trace. Names are those of
``model.named_parameters()`` of the Hugging Face ``*ForCausalLM`` class; the family is
``model.config.model_type``.

| family (``model_type``) | embeddings | layer ``i`` | attention | mlp | layer norms | final |
|---|---|---|---|---|---|---|
| ``gpt_neo`` | ``wte``, ``wpe``, ``lm_head`` | ``h.i`` | ``attn.attention.{q,k,v,out}_proj`` | ``mlp`` | ``ln_1``, ``ln_2`` | ``ln_f`` |
| ``gpt2`` | ``wte``, ``wpe``, ``lm_head`` | ``h.i`` | ``attn.c_attn`` (qkv), ``attn.c_proj`` (out) | ``mlp`` | ``ln_1``, ``ln_2`` | ``ln_f`` |
| ``gpt_neox`` | ``embed_in``, ``lm_head`` (``embed_out`` before transformers 5) | ``layers.i`` | ``attention.query_key_value`` (qkv), ``attention.dense`` (out) | ``mlp`` | ``input_layernorm``, ``post_attention_layernorm`` | ``final_layer_norm`` |
| ``llama`` | ``embed_tokens``, ``lm_head`` | ``layers.i`` | ``self_attn.{q,k,v,o}_proj`` | ``mlp`` | ``input_layernorm``, ``post_attention_layernorm`` | ``norm`` |
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["parameter_group", "group_columns", "FAMILIES"]


@dataclass(frozen=True)
class _Layout:
    embeddings: re.Pattern
    final: re.Pattern
    layer: re.Pattern  # groups: (layer index, rest of the name)
    attention: tuple[tuple[re.Pattern, str], ...]  # searched in the rest
    mlp: re.Pattern
    layernorm: re.Pattern


def _layout(embeddings: str, final: str, layer: str, attention: dict[str, str], mlp: str, layernorm: str) -> _Layout:
    return _Layout(re.compile(embeddings), re.compile(final), re.compile(layer),
                   tuple((re.compile(p), g) for p, g in attention.items()), re.compile(mlp), re.compile(layernorm))


_LAYOUTS = {
    "gpt_neo": _layout(
        r"(^|\.)(wte|wpe)\.|^lm_head\.", r"(^|\.)ln_f\.", r"(?:^|\.)h\.(\d+)\.(.+)$",
        {r"attention\.q_proj\.": "q", r"attention\.k_proj\.": "k", r"attention\.v_proj\.": "v",
         r"attention\.out_proj\.": "out"},
        r"^mlp\.", r"^(ln_1|ln_2)\."),
    "gpt2": _layout(
        r"(^|\.)(wte|wpe)\.|^lm_head\.", r"(^|\.)ln_f\.", r"(?:^|\.)h\.(\d+)\.(.+)$",
        {r"^attn\.c_attn\.": "qkv", r"^attn\.c_proj\.": "out"},
        r"^mlp\.", r"^(ln_1|ln_2)\."),
    "gpt_neox": _layout(
        r"(^|\.)embed_in\.|^(embed_out|lm_head)\.", r"(^|\.)final_layer_norm\.", r"(?:^|\.)layers\.(\d+)\.(.+)$",
        {r"^attention\.query_key_value\.": "qkv", r"^attention\.dense\.": "out"},
        r"^mlp\.", r"^(input_layernorm|post_attention_layernorm)\."),
    "llama": _layout(
        r"(^|\.)embed_tokens\.|^lm_head\.", r"(^|\.)model\.norm\.|^norm\.", r"(?:^|\.)layers\.(\d+)\.(.+)$",
        {r"^self_attn\.q_proj\.": "q", r"^self_attn\.k_proj\.": "k", r"^self_attn\.v_proj\.": "v",
         r"^self_attn\.o_proj\.": "out"},
        r"^mlp\.", r"^(input_layernorm|post_attention_layernorm)\."),
}

FAMILIES = tuple(sorted(_LAYOUTS))
"""The ``model_type`` values with parameter groups."""


def parameter_group(name: str, model_type: str) -> str:
    """The group of parameter ``name`` of a ``model_type`` model (see the module docstring).

    An unknown ``model_type`` is a one-line ValueError listing the supported ones.
    """
    layout = _LAYOUTS.get(model_type)
    if layout is None:
        raise ValueError(f"model_type {model_type!r}: parameter groups are defined for {', '.join(FAMILIES)}")
    if layout.embeddings.search(name):
        return "embeddings"
    if layout.final.search(name):
        return "final.layernorm"
    m = layout.layer.search(name)
    if m is None:
        return "other"
    i, rest = m.group(1), m.group(2)
    for pattern, group in layout.attention:
        if pattern.search(rest):
            return f"layer{i}.{group}"
    if layout.mlp.search(rest):
        return f"layer{i}.mlp"
    if layout.layernorm.search(rest):
        return f"layer{i}.layernorm"
    return "other"


def group_columns(names: Sequence[str], model_type: str) -> dict[str, list[int]]:
    """Group name → indices into ``names`` (groups in order of first appearance)."""
    out: dict[str, list[int]] = {}
    for j, n in enumerate(names):
        out.setdefault(parameter_group(n, model_type), []).append(j)
    return out
