"""Resolved parameters are typed, immutable values read by key or attribute, their defaults
filled by jsonschema's default-filling validator (villani.plan.config, villani.plan.frozen).

Driven by the shipped parameter files (params.yaml, configs/*.yaml): every default of the
schema a file leaves out is in the resolved parameters; a dataset entry stays the
override it was written as; nothing can be changed in place; the digests that segment
manifests, checkpoints and measure JSONs record are byte for byte those of the plain dict."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from tests.conftest import REPO
from villani.plan.config import dataset_names, dataset_params, load_params, read_yaml
from villani.plan.digest import run_digest, stage_digest, stage_inputs, trained_params
from villani.plan.frozen import Params, ParamsList
from villani.plan.params_file import load_schema
from villani.plan.runs import variants
from villani.plan.stages import STAGES

FILES = [[REPO / "params.yaml"]] + [[REPO / "params.yaml", f] for f in sorted((REPO / "configs").glob("*.yaml"))]


def _defaults(schema, given, resolved, key=""):
    """(key, default, resolved value) of every schema default ``given`` leaves out."""
    for name, sub in (schema.get("properties") or {}).items():
        where = f"{key}.{name}" if key else name
        if name in resolved and isinstance(resolved[name], dict) and "properties" in sub:
            yield from _defaults(sub, (given or {}).get(name) or {}, resolved[name], where)
        elif "default" in sub and name not in (given or {}):
            yield where, sub["default"], resolved.get(name)


@pytest.mark.parametrize("files", FILES, ids=lambda fs: "+".join(f.name for f in fs))
def test_every_default_a_file_leaves_out_is_filled_and_datasets_stay_overrides(files):
    p = load_params(files)
    given: dict = {}
    for f in files:
        doc = read_yaml(f)
        given = {**given, **{k: {**(given.get(k) or {}), **v} if isinstance(v, dict) else v for k, v in doc.items()}}
    found = list(_defaults(load_schema(), given, p.to_dict()))
    assert found and all(value == default for _, default, value in found), [f for f in found if f[1] != f[2]]
    for name in dataset_names(p):
        q = dataset_params(p, name)
        assert isinstance(q, Params) and q.data.name == name
    if p.datasets:  # an entry is what the file wrote, not filled with defaults
        written = read_yaml(files[-1]).get("datasets") or {}
        assert p.to_dict()["datasets"] == written


def test_parameters_are_read_by_attribute_and_key_and_cannot_change():
    p = load_params([REPO / "params.yaml"])
    assert isinstance(p, Params) and isinstance(p.train.lambdas, ParamsList)
    assert p.train.lr == p["train"]["lr"] and p.measure.s_values == p["measure"]["s_values"]
    assert type(p.train.steps) is int and type(p.train.lr) is float
    for change in (lambda: p.__setitem__("train", {}), lambda: p.train.__setitem__("lr", 1.0),
                   lambda: p.train.lambdas.append(1.0), lambda: setattr(p.train, "lr", 1.0),
                   lambda: p.train.update(lr=1.0), lambda: p.train.pop("lr"), lambda: p.train.lambdas.sort()):
        with pytest.raises(TypeError, match=r"parameters are read-only.*p\.to_dict\(\)"):
            change()
    with pytest.raises(AttributeError, match="parameters have no key 'lrr'"):
        p.train.lrr
    mine = p.to_dict()
    mine["train"]["lr"] = 1.0
    mine["train"]["lambdas"].append(9.0)
    assert p.train.lr != 1.0 and 9.0 not in p.train.lambdas  # a copy is yours to change
    assert copy.deepcopy(p) == p and type(copy.deepcopy(p)) is dict
    assert pickle.loads(pickle.dumps(p)) == p and type(pickle.loads(pickle.dumps(p))) is Params


@pytest.mark.parametrize("files", FILES, ids=lambda fs: "+".join(f.name for f in fs))
def test_digests_and_serialised_parameters_are_those_of_the_plain_dict(files):
    p = load_params(files)
    for name in dataset_names(p):
        q = dataset_params(p, name)
        plain = q.to_dict()
        assert json.dumps(q, sort_keys=True) == json.dumps(plain, sort_keys=True)
        for stage in STAGES:
            assert stage_digest(q, stage) == stage_digest(plain, stage), stage
            assert json.dumps(stage_inputs(q, stage), sort_keys=True) == json.dumps(stage_inputs(plain, stage),
                                                                                   sort_keys=True)
        for variant in variants(q):
            assert run_digest(q, variant, 0.01, 0) == run_digest(plain, variant, 0.01, 0), variant
            assert trained_params(q, variant) == trained_params(plain, variant)


def test_a_whole_float_where_the_schema_asks_an_integer_is_an_integer_with_the_same_digest():
    from villani.plan.config import resolve

    doc = read_yaml(REPO / "params.yaml")
    as_int = resolve(doc)
    doc["train"]["steps"], doc["measure"]["batch_size"] = float(doc["train"]["steps"]), 16.0
    p = resolve(doc)
    assert type(p.train.steps) is int and p.train.steps == as_int.train.steps and p.measure.batch_size == 16
    assert stage_digest(p, "train") == stage_digest(as_int, "train")


def test_an_integer_where_the_schema_asks_a_number_is_a_float_with_the_same_digest():
    """Every number key reads as a float (``span: 1`` is 1.0; β may also be null or ``table1``),
    every integer key as an int — so no reader casts; an integer λ is still refused (DVC
    names a run's folder by the text of λ)."""
    from villani.plan.config import ParamsError, resolve

    doc = read_yaml(REPO / "params.yaml")
    as_float = resolve(doc)
    doc["landscape"]["span"], doc["measure"]["s_values"], doc["train"]["langevin"]["beta"] = 1, [1], 2
    doc["rays"]["theta_sq_min"] = 100
    p = resolve(doc)
    assert (p.landscape.span, p.measure.s_values, p.train.langevin.beta, p.rays.theta_sq_min) == (1.0, [1.0], 2.0,
                                                                                                  100.0)
    assert all(type(x) is float for x in (p.landscape.span, p.measure.s_values[0], p.train.langevin.beta))
    assert type(p.measure.num_probes) is int and type(p.train.seeds[0]) is int and p.train.langevin.beta != "table1"
    assert stage_digest(p, "landscape") == stage_digest(as_float, "landscape")
    doc["train"]["lambdas"] = [0, 0.1]
    with pytest.raises(ParamsError, match=r"train.lambdas\[0\]: 0 is invalid \(write λ as a float, e.g. 0.0"):
        resolve(doc)
