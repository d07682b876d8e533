"""Model families: each supported causal-LM family's parameter layout and config-key aliases.

A family is a Hugging Face ``model_type`` (``model.config.model_type`` in the params;
:data:`DEFAULT_FAMILY` when a config names none). Two things differ between families and
live here, once:

**Config keys.** The same quantity has different key names in different families' configs
(the config classes accept each other's spellings only partly). :data:`CONFIG_KEYS` lists
the spellings of each quantity; :func:`config_key` picks the one a config uses, else the
family's own (:data:`FAMILY_KEYS`, else the canonical first spelling)::

    | quantity | spellings | GPT-Neo | GPT-2 | others (GPT-NeoX, Llama, …) |
    |---|---|---|---|---|
    | hidden | hidden_size, n_embd | hidden_size | hidden_size | hidden_size |
    | heads | num_heads, num_attention_heads, n_head | num_heads | num_attention_heads | num_attention_heads |
    | layers | num_layers, num_hidden_layers, n_layer | num_layers | n_layer | num_hidden_layers |
    | mlp | intermediate_size, n_inner | intermediate_size | n_inner | intermediate_size |
    | kv_heads | num_key_value_heads | — | — | num_key_value_heads |

(GPT-2's config maps ``hidden_size``/``num_attention_heads`` onto ``n_embd``/``n_head``.)

**Parameter layout.** Names are those of ``model.named_parameters()`` of the family's
``*ForCausalLM`` class; :data:`LAYOUTS` holds the patterns that sort them into the
per-block trace groups of SPEC §2 (:mod:`villani.measure.parameter_groups` applies them)::

    | family (model_type) | embeddings | layer i | attention | mlp | layer norms | final |
    |---|---|---|---|---|---|---|
    | gpt_neo | wte, wpe, lm_head | h.i | attn.attention.{q,k,v,out}_proj | mlp | ln_1, ln_2 | ln_f |
    | gpt2 | wte, wpe, lm_head | h.i | attn.c_attn (qkv), attn.c_proj (out) | mlp | ln_1, ln_2 | ln_f |
    | gpt_neox | embed_in, lm_head (embed_out before transformers 5) | layers.i | attention.query_key_value (qkv), attention.dense (out) | mlp | input_layernorm, post_attention_layernorm | final_layer_norm |
    | llama (also mistral, qwen2, gemma) | embed_tokens, lm_head | layers.i | self_attn.{q,k,v,o}_proj | mlp | input_layernorm, post_attention_layernorm | norm |

**Shapes.** What a family's config and model classes refuse when they are built (or, for
Llama's grouped heads, at the first forward pass), checked on the parameters before any job
(:func:`shape_problem`, called by the parameter check): the heads divide the width
(GPT-Neo, GPT-2, GPT-NeoX, Llama), GPT-Neo's ``attention_types`` — a list of
``[[types…], repeats]`` with types ``global`` or ``local`` — covers exactly its layers, and
Llama's key-value heads divide its heads. A key the config does not give takes the config
class's default (:data:`SHAPE_DEFAULTS`, held equal to transformers' by
``tests/test_model_shapes.py``, which also builds every configuration these rules pass or
refuse and finds the classes agree).

No torch, no transformers: a leaf every layer may import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DEFAULT_FAMILY", "CONFIG_KEYS", "FAMILY_KEYS", "family_of", "config_key", "config_value",
           "SHAPE_DEFAULTS", "shape_problem", "Layout", "LAYOUTS", "FAMILIES"]

DEFAULT_FAMILY = "gpt_neo"
"""``model_type`` of a ``model.config`` that names none."""

CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd"),
    "heads": ("num_heads", "num_attention_heads", "n_head"),
    "layers": ("num_layers", "num_hidden_layers", "n_layer"),
    "mlp": ("intermediate_size", "n_inner"),
    "kv_heads": ("num_key_value_heads",),
}
"""quantity -> its key spellings, looked up in this order."""

FAMILY_KEYS: dict[str, dict[str, str]] = {
    "gpt_neo": {"heads": "num_heads", "layers": "num_layers"},
    "gpt2": {"heads": "num_attention_heads", "layers": "n_layer", "mlp": "n_inner"},
}
"""family -> the key it is written under where a config uses none of the spellings and
the family's differs from the canonical one (``num_attention_heads`` for heads,
``num_hidden_layers`` for layers, the first spelling otherwise)."""

_CANONICAL = {"heads": "num_attention_heads", "layers": "num_hidden_layers"}


def family_of(config: Mapping) -> str:
    """The family (``model_type``) of a ``model.config`` mapping."""
    return str(config.get("model_type", DEFAULT_FAMILY))


def config_key(config: Mapping, quantity: str) -> str:
    """The key under which ``config`` holds ``quantity`` (a key of :data:`CONFIG_KEYS`): the
    first spelling present, else the family's own. An unknown quantity is a ValueError."""
    spellings = CONFIG_KEYS.get(quantity)
    if spellings is None:
        raise ValueError(f"config quantity {quantity!r}: known are {', '.join(CONFIG_KEYS)}")
    present = next((k for k in spellings if k in config), None)
    if present is not None:
        return present
    return FAMILY_KEYS.get(family_of(config), {}).get(quantity) or _CANONICAL.get(quantity, spellings[0])


def config_value(config: Mapping, quantity: str, default=None):
    """``config``'s value of ``quantity`` under whichever spelling it uses, else ``default``."""
    return config.get(config_key(config, quantity), default)


@dataclass(frozen=True)
class Layout:
    """Parameter-name patterns of one family (searched with ``re.search``)."""

    embeddings: re.Pattern
    final: re.Pattern
    layer: re.Pattern  # groups: (layer index, rest of the name)
    attention: tuple[tuple[re.Pattern, str], ...]  # searched in the rest; -> q/k/v/qkv/out
    mlp: re.Pattern
    layernorm: re.Pattern


def _layout(embeddings: str, final: str, layer: str, attention: dict[str, str], mlp: str, layernorm: str) -> Layout:
    return Layout(re.compile(embeddings), re.compile(final), re.compile(layer),
                  tuple((re.compile(p), g) for p, g in attention.items()), re.compile(mlp), re.compile(layernorm))


LAYOUTS: dict[str, Layout] = {
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
# Llama's names exactly (Qwen2 adds q/k/v biases under the same modules, Gemma ties its head)
LAYOUTS.update({family: LAYOUTS["llama"] for family in ("mistral", "qwen2", "gemma")})

FAMILIES = tuple(sorted(LAYOUTS))
"""The ``model_type`` values with a parameter layout."""


SHAPE_DEFAULTS: dict[str, dict[str, object]] = {
    "gpt_neo": {"hidden": 2048, "heads": 16, "layers": 24, "attention_types": [[["global", "local"], 12]]},
    "gpt2": {"hidden": 768, "heads": 12},
    "gpt_neox": {"hidden": 6144, "heads": 64},
    "llama": {"hidden": 4096, "heads": 32},
}
"""Per family, the config class's defaults of the quantities :func:`shape_problem` checks
(transformers' ``GPTNeoConfig``, ``GPT2Config``, ``GPTNeoXConfig``, ``LlamaConfig``)."""

_ATTENTION = ("global", "local")


def _attention_layers(types) -> list | None:
    """GPT-Neo's ``attention_types`` expanded to one type per layer (as ``GPTNeoConfig``
    does), or None when it is not a list of ``[[types…], repeats ≥ 1]``."""
    if not isinstance(types, (list, tuple)):
        return None
    layers = []
    for item in types:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], (list, tuple))
                and isinstance(item[1], int) and not isinstance(item[1], bool) and item[1] >= 1):
            return None
        layers += list(item[0]) * item[1]
    return layers


def shape_problem(config: Mapping, prefix: str = "") -> tuple[str, object, str] | None:
    """(key, value, what is allowed) of the first shape ``config`` (a ``model.config``
    mapping, its keys named with ``prefix``) has that its family's classes refuse (module
    doc), or None. Families without rules here are checked when their model is built."""
    family = family_of(config)
    defaults = SHAPE_DEFAULTS.get(family)
    if defaults is None:
        return None

    def get(quantity):
        return config.get(config_key(config, quantity), defaults.get(quantity))

    hidden, heads = get("hidden"), get("heads")
    hkey, wkey, lkey = (prefix + config_key(config, q) for q in ("heads", "hidden", "layers"))
    if family == DEFAULT_FAMILY:
        types = config.get("attention_types", defaults["attention_types"])
        layers = _attention_layers(types)
        if layers is None or any(t not in _ATTENTION for t in layers):
            return (prefix + "attention_types", types, "a list of [[types…], repeats]: types global or local, "
                                                       "repeats an integer ≥ 1")
        if len(layers) != get("layers"):
            return (prefix + "attention_types", types, f"it covers {len(layers)} layers; it must cover "
                                                       f"{lkey} = {get('layers')}")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads:
        return (wkey, hidden, f"a multiple of {hkey} = {heads}")
    kv = config.get("num_key_value_heads")
    if family == "llama" and isinstance(kv, int) and isinstance(heads, int) and kv > 0 and heads % kv:
        return (prefix + "num_key_value_heads", kv, f"a divisor of {hkey} = {heads}")
    return None
