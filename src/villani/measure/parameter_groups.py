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

The groups partition θ, so group traces sum to the total trace. Each family's parameter
names and the patterns that sort them are its layout in :mod:`villani.plan.families`
(``LAYOUTS``, tabled there); the family is ``model.config.model_type``.
"""

from __future__ import annotations

from collections.abc import Sequence

from villani.plan.families import FAMILIES, LAYOUTS

__all__ = ["parameter_group", "group_columns", "group_kind", "GROUP_KINDS", "FAMILIES"]

#: The kinds of parameter group (:func:`group_kind`): what a reader asks of a group
#: ("does the growth come from the LayerNorm gains or the embeddings?").
GROUP_KINDS = ("embeddings", "attention", "mlp", "layernorm", "other")


def parameter_group(name: str, model_type: str) -> str:
    """The group of parameter ``name`` of a ``model_type`` model (see the module docstring).

    An unknown ``model_type`` is a one-line ValueError listing the supported ones.
    """
    layout = LAYOUTS.get(model_type)
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


def group_kind(group: str) -> str:
    """The kind of a group of :func:`parameter_group` (one of :data:`GROUP_KINDS`): ``embeddings``,
    ``attention`` (``layer{i}.q/k/v/qkv/out``), ``mlp``, ``layernorm`` (every block's and the
    final one: gains and biases) or ``other``.

    >>> [group_kind(g) for g in ("embeddings", "layer0.k", "layer1.mlp", "final.layernorm", "other")]
    ['embeddings', 'attention', 'mlp', 'layernorm', 'other']
    """
    if group == "embeddings":
        return "embeddings"
    last = group.rsplit(".", 1)[-1]
    if last == "layernorm":
        return "layernorm"
    if last == "mlp":
        return "mlp"
    if group.startswith("layer") and last in ("q", "k", "v", "qkv", "out"):
        return "attention"
    return "other"
