"""villani.plan.families: the config-key spellings each family's real config class reads, and
the callers that size or describe a model through them."""

import pytest
from transformers import AutoConfig

from villani.plan.families import CONFIG_KEYS, DEFAULT_FAMILY, FAMILIES, config_key, config_value, family_of
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


# --------------------------------------------------------------------------- shapes
def test_the_shape_defaults_are_the_config_classes():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from villani.plan.families import SHAPE_DEFAULTS

    for family, defaults in SHAPE_DEFAULTS.items():
        config = CONFIG_MAPPING[family]()
        for quantity, value in defaults.items():
            got = getattr(config, quantity if quantity == "attention_types" else QUANTITY_ATTRIBUTE[quantity])
            assert got == value, (family, quantity, got, value)


def _gpt_neo(**kw):
    return {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 32, "window_size": 8,
            "attention_types": [[["global", "local"], 1]], **kw}


SHAPES = [
    _gpt_neo(), _gpt_neo(hidden_size=65), _gpt_neo(num_heads=3), _gpt_neo(hidden_size=66, num_heads=3),
    _gpt_neo(attention_types=[[["global", "local"], 5]]), _gpt_neo(attention_types=[[["global"], 2]]),
    _gpt_neo(attention_types=[[["global", "sparse"], 1]]), _gpt_neo(attention_types=[["global", 2]]),
    _gpt_neo(num_layers=4, attention_types=[[["local"], 1], [["global", "local"], 1], [["global"], 1]]),
    {"hidden_size": 64, "num_heads": 4, "num_layers": 2},  # attention_types left to GPTNeoConfig's 24 layers
    *({"model_type": f, "hidden_size": h, "num_attention_heads": 4, "num_hidden_layers": 2, "intermediate_size": 32}
      for f in ("gpt_neox", "llama") for h in (64, 65)),
    *({"model_type": "gpt2", "n_embd": h, "n_head": 4, "n_layer": 2} for h in (64, 66)),
    *({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": kv,
       "num_hidden_layers": 2, "intermediate_size": 32} for kv in (1, 2, 3)),
]


@pytest.mark.parametrize("config", SHAPES, ids=lambda c: repr(c)[:70])
def test_the_shape_rules_refuse_exactly_what_the_model_classes_refuse(config):
    """Each configuration: the parameter check (shape_problem) refuses it if and only if its
    model cannot be built or cannot take a forward pass (Llama's grouped heads fail there)."""
    import torch

    from villani.plan.families import shape_problem
    from villani.model.causal_lm import build_model

    problem = shape_problem(config, prefix="model.config.")
    try:
        model = build_model({"config": config}, vocab_size=32, seq_len=8, seed=0)
        model(input_ids=torch.zeros((1, 8), dtype=torch.long))
        refused = None
    except Exception as e:  # whatever the class raises
        refused = f"{type(e).__name__}: {e}"
    assert (problem is None) == (refused is None), (config, problem, refused)
    if problem is not None:
        assert problem[0].startswith("model.config."), problem  # the key (attention_types: its default too)


@pytest.mark.parametrize("values, key", [
    ({"hidden_size": 65, "num_heads": 4}, "model.config.hidden_size: 65 is invalid (a multiple of "
                                          "model.config.num_heads = 4)"),
    ({"attention_types": [[["global", "local"], 5]]}, 'model.config.attention_types: [[["global", "local"], 5]] is '
                                                      "invalid (it covers 10 layers; it must cover "
                                                      "model.config.num_layers = 2)"),
])
def test_validate_and_the_parse_name_the_key_of_a_refused_shape(values, key, tmp_path, capsys):
    """The issue's two cases over the shipped params.yaml: one line naming the key, from
    `villani validate` and from every stage command (the same parse)."""
    from tests.conftest import REPO
    from villani.cli import main
    from villani.plan.config import dump_yaml

    dump_yaml({"model": {"config": values}}, tmp_path / "bad.yaml")
    for argv in (["validate"], ["train", "--lam", "0.012", "--seed", "0", "--until", "240"]):
        rc = main(["--params", str(REPO / "params.yaml"), "--params", str(tmp_path / "bad.yaml"),
                   "--results", str(tmp_path / "results"), *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and err.endswith(f"bad.yaml: {key}"), err


def test_validate_builds_the_model_for_what_the_shape_rules_do_not_know(tmp_path, monkeypatch):
    """A refusal the rules do not model (here: the rules bypassed) still stops validate: the
    model is built on the meta device, one line naming model.config."""
    from tests.conftest import tiny_params
    from villani.cli.commands import _check_architecture
    from villani.plan import config

    _check_architecture(tiny_params())
    monkeypatch.setattr(config, "shape_problem", lambda *a, **k: None)  # the rules bypassed
    p = tiny_params(model={"config": {"hidden_size": 17}})
    with pytest.raises(ValueError, match=r"^model.config: not a valid gpt_neo model \(.*divisible.*\)$"):
        _check_architecture(p)
