"""Parameter validation: defaults, one-line errors naming the key, cross-key checks, digests."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, tiny_params
from villani.plan.config import ParamsError, load_params, load_schema, resolve
from villani.plan.digest import stage_digest


def test_committed_params_are_valid_and_complete():
    p = load_params([REPO / "params.yaml"])
    # the paper's 0, 1e-4, 1e-3, 1e-2 by λ·η·T; the other update rules at its 1e-2
    from villani.plan.paper_lambda import PAPER_LAMBDAS, match

    assert all(match(p, name).ours is not None for name in PAPER_LAMBDAS)
    strong = match(p, "strong").ours
    assert p["train"]["adam_l2"]["lambdas"] == [strong] and p["train"]["langevin"]["lambdas"] == [strong]
    assert p["train"]["adamw_noise"]["lambdas"] == [strong]  # Fig 5's noise injection (sec6e_noise_injection)
    assert p["train"]["adamw_noise"]["langevin_beta"] == "table1" and p["train"]["langevin"]["beta"] == "table1"
    assert p["measure"]["num_probes"] >= 2


def test_defaults_fill_an_empty_document():
    p = resolve({})
    assert p["data"]["source"] == "builtin:pydoc"
    assert p["train"]["decay_mode"] == "decoupled"


@pytest.mark.parametrize("doc, key, fragment", [
    ({"train": {"lambdas": [-0.1]}}, "train.lambdas[0]", "≥ 0"),
    ({"train": {"lambdas": ["abc"]}}, "train.lambdas[0]", "number"),
    ({"train": {"lambdas": []}}, "train.lambdas", "at least 1"),
    ({"train": {"lambdas": [0.001, 0.001]}}, "train.lambdas", "no duplicates"),
    ({"train": {"lambdas": [0, 0.1], "langevin": {"lambdas": []}, "adam_l2": {"lambdas": []}}}, "train.lambdas[0]",
     "write λ as a float"),
    ({"train": {"steps": 0}}, "train.steps", "≥ 1"),
    ({"data": {"source": "s3:bucket"}}, "data.source", "builtin:pydoc"),
    ({"data": {"tokenizer": {"vocab_size": 100}}}, "data.tokenizer.vocab_size", "≥ 256"),
    ({"measure": {"s_values": [0.0]}}, "measure.s_values[0]", "> 0"),
    ({"measure": {"num_probes": 1}}, "measure.num_probes", "≥ 2"),
    ({"measure": {"top_k": 30}}, "measure.lanczos_steps", "≥ measure.top_k"),
    ({"train": {"steps": 10, "warmup_steps": 0, "checkpoints": {"count": 20}}}, "train.checkpoints.count", "≤ train.steps"),
    ({"train": {"segments": 9}}, "train.segments", "number of checkpoints"),
    ({"data": {"seq_len": 128}, "model": {"config": {"max_position_embeddings": 64}}}, "data.seq_len",
     "max_position_embeddings"),
    ({"trian": {}}, "trian", "unknown key"),
    ({"train": {"lamdbas": [0.1]}}, "train.lamdbas", "unknown key"),
    ({"train": 3}, "train", "object"),
])
def test_bad_values_name_the_key(doc, key, fragment):
    with pytest.raises(ParamsError) as e:
        resolve(doc, source="p.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"p.yaml: {key}:"), msg
    assert fragment in msg, msg


def test_pyyaml_style_numeric_strings_are_numbers():
    p = resolve({"train": {"lambdas": ["0.0", "1e-3"], "lr": "3e-4"}})
    assert p["train"]["lambdas"] == [0.0, 0.001]
    assert p["train"]["lr"] == 3e-4


def test_digest_changes_only_with_keys_the_stage_reads():
    p = tiny_params()
    q = tiny_params(train={"lambdas": [0.0, 0.01, 0.1]})
    assert stage_digest(p, "train") == stage_digest(q, "train")
    r = tiny_params(train={"lr": 0.02})
    assert stage_digest(p, "train") != stage_digest(r, "train")
    s = tiny_params(measure={"num_probes": 4})
    assert stage_digest(p, "train") == stage_digest(s, "train")
    assert stage_digest(p, "measure") != stage_digest(s, "measure")
    n = tiny_params(train={"adamw_noise": {"grad_std": 0.1, "lambdas": [0.01]}})
    assert stage_digest(p, "train", "adamw") == stage_digest(n, "train", "adamw")
    assert stage_digest(p, "train", "adamw_noise") != stage_digest(n, "train", "adamw_noise")


def test_cli_validate_one_line_error(tmp_path, capsys):
    from villani.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {lambdas: [-1.0]}\n")
    assert main(["validate", "--params", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "train.lambdas[0]" in err and "-1.0" in err


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ParamsError, match="cannot read parameter file"):
        load_params([tmp_path / "missing.yaml"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: {lambdas: [0.1\n")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params([broken])


@pytest.mark.parametrize("doc, key, fragment", [
    ({"train": {"lr": float("nan")}}, "train.lr", "finite"),
    ({"measure": {"s_values": [1.0, float("inf")]}}, "measure.s_values[1]", "finite"),
    ({"model": {"config": {"layer_norm_epsilon": float("nan")}}}, "model.config.layer_norm_epsilon", "finite"),
    ({"measure": {"num_probes": 10**9}}, "measure.num_probes", "≥ 2 and ≤ 100000"),
    ({"train": {"steps": 10**12}}, "train.steps", "≤ 100000000"),
    ({"data": {"name": "a" * 300}}, "data.name", "at most 64 characters"),
    ({"data": {"name": "pydoc\n"}}, "data.name", "without newlines"),
    ({"data": {"source": "hf:x\n"}}, "data.source", "without newlines"),
])
def test_nan_huge_and_multiline_values_name_the_key(doc, key, fragment):
    with pytest.raises(ParamsError) as e:
        resolve(doc, source="p.yaml")
    msg = str(e.value)
    assert "\n" not in msg and f"p.yaml: {key}:" in msg and fragment in msg, msg


def test_patterns_match_the_whole_text():
    """`$` matches before a final newline; every pattern of the schema ends in \\Z."""
    import re

    def patterns(node):
        if isinstance(node, dict):
            if "pattern" in node:
                yield node["pattern"]
            for v in node.values():
                yield from patterns(v)
    found = list(patterns(load_schema()))
    assert found and all(p.endswith(r"\Z") for p in found), found
    assert not re.search(found[0], "pydoc\n")
