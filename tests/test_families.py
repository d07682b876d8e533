"""villani.families: the config-key spellings each family's real config class reads, and
the callers that size or describe a model through them."""

import pytest
from transformers import AutoConfig

from villani.families import CONFIG_KEYS, DEFAULT_FAMILY, FAMILIES, config_key, config_value, family_of
from villani.measure.hvp_cost import sized_config

QUANTITY_ATTRIBUTE = {"hidden": "hidden_size", "heads": "num_attention_heads", "layers": "num_hidden_layers",
                      "mlp": "intermediate_size"}


@pytest.mark.parametrize("family", ["gpt_neo", "gpt2", "gpt_neox", "llama"])
def test_a_family_default_key_is_one_its_config_class_reads(family):
    """Written under the family's own key, each quantity reaches the transformers config."""
    values = {"hidden": 64, "heads": 4, "layers": 2, "mlp": 96}
    cfg = {config_key({"model_type": family}, q): v for q, v in values.items()}
    extra = {"attention_types": [[["global", "local"], 1]]} if family == "gpt_neo" else {}  # one type per layer
    config = AutoConfig.for_model(family, **cfg, **extra)
    for quantity, value in values.items():
        if quantity == "mlp" and family == "gpt2":
            assert config.n_inner == value
        else:
            assert getattr(config, QUANTITY_ATTRIBUTE[quantity]) == value, (family, quantity, cfg)


def test_the_spelling_a_config_uses_wins_and_unknowns_fail():
    assert config_key({"model_type": "llama", "num_heads": 2}, "heads") == "num_heads"
    assert config_key({"n_embd": 8}, "hidden") == "n_embd"
    assert config_key({}, "heads") == "num_heads" and family_of({}) == DEFAULT_FAMILY == "gpt_neo"
    assert config_value({"model_type": "gpt2", "n_layer": 5}, "layers") == 5
    assert config_value({"model_type": "gpt2"}, "layers") is None
    assert all(config_key({}, q) in spellings for q, spellings in CONFIG_KEYS.items())
    with pytest.raises(ValueError, match="config quantity 'width'"):
        config_key({}, "width")
    assert {"gpt_neo", "gpt2", "gpt_neox", "llama"} <= set(FAMILIES)


@pytest.mark.parametrize("config, keys", [
    ({"model_type": "gpt_neo", "num_heads": 6, "hidden_size": 96}, ("hidden_size", "num_heads", "intermediate_size")),
    ({"model_type": "gpt2", "n_head": 6, "n_embd": 96}, ("n_embd", "n_head", "n_inner")),
    ({"model_type": "llama", "num_attention_heads": 6, "num_key_value_heads": 3},
     ("hidden_size", "num_attention_heads", "intermediate_size")),
])
def test_sized_config_writes_the_keys_the_config_uses(config, keys):
    sized = sized_config({"config": config, "init": "scratch"}, 40)["config"]
    hidden, heads, mlp = keys
    assert (sized[hidden], sized[heads], sized[mlp]) == (40, 5, 160)
    assert sized.get("num_key_value_heads", 1) == 1
    built = AutoConfig.for_model(sized["model_type"], **{k: v for k, v in sized.items() if k != "model_type"})
    assert (built.hidden_size, built.num_attention_heads) == (40, 5)
