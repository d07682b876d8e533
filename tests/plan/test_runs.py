"""The runs a parameter set defines, per variant, and the settings each trains under."""

from __future__ import annotations

import pytest

from tests.conftest import tiny_params
from villani.dag import targets
from villani.plan.config import ParamsError
from villani.plan.digest import stage_digest, stage_keys
from villani.plan.runs import overridden_keys, runs, variant_kind, variant_params, variants


def _p(**train):
    return tiny_params(train={"lambdas": [0.0, 0.01], "seeds": [0, 1], **train})


def test_every_variant_and_its_runs():
    p = _p(adamw_noise={"lambdas": [0.01]}, adam_l2={"lambdas": [0.01]}, langevin={"lambdas": [0.01], "lr": 0.2},
           sweep={"lr": [5e-05, 0.0002], "warmup_steps": [2]})
    assert variants(p) == ["adamw", "adamw_lr5e-05", "adamw_lr0.0002", "adamw_wu2", "adamw_noise", "adam_l2",
                           "langevin"]
    rs = list(runs(p))
    assert len(rs) == 2 * 2 * 4 + 2 * 3  # 4 AdamW arms over 2 λ × 2 seeds, three arms at one λ
    assert {r.variant for r in runs(p, ("adamw",))} == {"adamw"}  # exact names
    assert {variant_kind(v) for v in variants(p)} == {"adamw", "adamw_noise", "adam_l2", "langevin"}
    # every run of every variant is measured
    assert len(targets.measurements(p)) == len(rs) * 5
    assert set(targets.variant_values(p)) == set(variants(p))
    with pytest.raises(ValueError, match="unknown variant"):
        variant_kind("sgd")


def test_variant_params_and_the_keys_each_job_reads():
    p = _p(langevin={"lambdas": [0.01], "lr": 0.2}, sweep={"lr": [5e-05], "warmup_steps": [2]})
    assert variant_params(p, "adamw_lr5e-05")["train"]["lr"] == 5e-05
    assert variant_params(p, "adamw_wu2")["train"]["warmup_steps"] == 2
    lv = variant_params(p, "langevin")["train"]
    assert (lv["lr"], lv["warmup_steps"], lv["grad_clip"], lv["decay_mode"]) == (0.2, 0, None, "coupled")
    assert variant_params(p, "adam_l2")["train"]["decay_mode"] == "coupled"
    assert p["train"]["lr"] == 0.01  # the original is untouched
    # a job never lists a key its variant overrides, and lists the variant's own settings
    for v in ("adamw_lr5e-05", "adamw_wu2", "adam_l2", "langevin"):
        keys = stage_keys(p, "train", v)
        assert not set(overridden_keys(v)) & set(keys), v
    assert "train.langevin.lr" in stage_keys(p, "train", "langevin")
    # the Langevin lr reaches the digest of its runs only
    q = _p(langevin={"lambdas": [0.01], "lr": 0.3}, sweep={"lr": [5e-05], "warmup_steps": [2]})
    assert stage_digest(p, "train", "langevin") != stage_digest(q, "train", "langevin")
    assert stage_digest(p, "train", "adamw") == stage_digest(q, "train", "adamw")


@pytest.mark.parametrize("train, key", [
    ({"langevin": {"lambdas": [0.5]}}, "train.langevin.lambdas"),
    ({"adam_l2": {"lambdas": [0.5]}}, "train.adam_l2.lambdas"),
    ({"adamw_noise": {"lambdas": [0.5]}}, "train.adamw_noise.lambdas"),
    ({"sweep": {"warmup_steps": [10_000]}}, "train.sweep.warmup_steps"),
    ({"langevin": {"lr": 0.0}}, "train.langevin.lr"),
    ({"noise": {"lambdas": []}}, "train.noise"),
])
def test_bad_arm_settings_are_one_line_errors(train, key):
    with pytest.raises(ParamsError, match=key.replace(".", r"\.")) as e:
        tiny_params(train=train)
    assert "\n" not in str(e.value)
