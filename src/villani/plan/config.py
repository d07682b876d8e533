"""Parameters: load, merge, fill defaults, validate — one module for Snakemake, DVC and the CLI.

The parameter documentation is the JSON schema ``villani/schemas/params.schema.yaml``
(package data, read with :mod:`importlib.resources`, so an installed wheel has it):
every key carries a description and a default. :func:`resolve` fills those defaults
(jsonschema's default-filling validator), validates types and ranges against the schema,
then runs the cross-key checks a schema cannot express (checkpoint count vs steps, Lanczos
steps vs k, …), and returns the parameters as an immutable
:class:`~villani.plan.frozen.Params` read by key or attribute (``p.train.lr``), each number
of the schema's type. Every failure is a :class:`ParamsError` whose message is one line
naming the file, the key, the value and what is allowed.

A file is read as YAML 1.2 (:mod:`villani.plan.params_file`), so ``1e-3`` is a float as
in DVC, and a quoted number is refused there. Documents parsed elsewhere with PyYAML
(Snakemake's ``configfile:``) may carry unquoted numbers as strings; :func:`resolve`
converts numeric strings where the schema asks for a number. Snakemake's ``--config``
values over the files are checked by :func:`resolve_workflow`, whose errors name
``--config`` when the files alone are valid.

**Several datasets.** A document names one dataset (the ``data`` group) or several: a
top-level ``datasets`` mapping from name to that dataset's overrides of any group. Then
the top-level groups hold what the datasets share, and :func:`dataset_params` gives each
dataset its complete parameters — the top-level groups (defaults filled) with the entry
merged over them by :func:`deep_merge` and ``data.name`` set to the entry's key — the very
shape of a single-dataset document, so every stage reads its dataset's parameters as it
would read a document of its own. :func:`resolve` validates each dataset's parameters (an
error names ``datasets.<name>`` and the key); :func:`dataset_names` lists the datasets of
either shape.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import jsonschema

from villani.plan.families import shape_problem
from villani.plan.frozen import Params, freeze, thaw
from villani.plan.layout import ACROSS
from villani.plan.params_file import (  # noqa: F401 (the reader of parameter files is part of this module's API)
    _NUMBER_RE,
    MAX_DEPTH,
    MAX_VALUES,
    SCHEMA,
    ParamsError,
    _deref,
    _key_of,
    _show,
    check_files,
    check_values,
    dump_yaml,
    load_schema,
    read_yaml,
)
from villani.plan.schedule import checkpoint_steps

GROUPS = ("data", "model", "train", "measure", "rays", "landscape", "bounds", "figures", "claims")


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """Recursively merge ``override`` into a copy of ``base`` (mappings merge, the rest replaces)."""
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_params(paths: Iterable[str | Path]) -> dict:
    """Load and merge parameter files in order (later files override), then :func:`resolve`."""
    paths = list(paths)
    merged: dict = {}
    for p in paths:
        merged = deep_merge(merged, read_yaml(p))
    return resolve(merged, source=", ".join(str(p) for p in paths) or "params")


# --------------------------------------------------------------------------- defaults
_PROPERTIES = jsonschema.Draft202012Validator.VALIDATORS["properties"]


def _set_defaults(validator, properties: Mapping, instance: Any, schema: Mapping):
    """jsonschema's ``properties`` keyword that first gives every absent key its ``default``
    (a group given as null too: ``train:`` alone is the default group), then validates and
    descends — so the defaults of a group filled here are filled in turn."""
    if isinstance(instance, dict):
        for key, sub in properties.items():
            group = sub.get("type") == "object" or "properties" in sub
            if "default" in sub and (key not in instance or (instance[key] is None and group)):
                instance[key] = copy.deepcopy(sub["default"])
    yield from _PROPERTIES(validator, properties, instance, schema)


# jsonschema's default-filling validator (the ``extend`` recipe of its FAQ). It does not
# follow ``$ref``: the only references are the entries of ``datasets``, which are overrides
# of the top-level groups, filled once merged over them (:func:`dataset_params`).
_DefaultFiller = jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                              {"properties": _set_defaults, "$ref": lambda *args: iter(())})


def _fill_defaults(doc: Any, schema: Mapping) -> Any:
    """``doc`` (changed in place) with every default of ``schema`` it lacks; its errors are
    reported afterwards by :func:`_schema_errors`."""
    for _ in _DefaultFiller(schema).iter_errors(doc):
        pass
    return doc


def _by_schema(doc: Any, schema: Mapping, root: Mapping, convert: Callable[[Any, Mapping, Mapping], Any]) -> Any:
    """``doc`` (its mappings changed in place) with ``convert(value, subschema, root)`` applied
    to every value the schema describes, a mapping's or list's before its items."""
    schema = _deref(schema, root)
    doc = convert(doc, schema, root)
    if isinstance(doc, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key in doc:
            sub = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                doc[key] = _by_schema(doc[key], sub, root, convert)
    if isinstance(doc, list) and isinstance(schema.get("items"), Mapping):
        return [_by_schema(x, schema["items"], root, convert) for x in doc]
    return doc


def _types(schema: Mapping, root: Mapping, alternatives: bool = False) -> list[str]:
    """The JSON types a (dereferenced) subschema allows; with ``alternatives`` its ``anyOf``'s too."""
    out = []
    for alt in [schema, *((_deref(a, root) for a in schema.get("anyOf", ())) if alternatives else ())]:
        t = alt.get("type")
        out += [t] if isinstance(t, str) else (t or [])
    return out


def _coerce_numbers(doc: Any, schema: Mapping) -> Any:
    """Turn numeric strings into numbers where the schema asks for a number (PyYAML's 1e-3)
    or an integer (Snakemake reads nested ``--config`` values, ``train={steps: 20}``, as text:
    "20" becomes 20, "2.5" stays text and is refused as not an integer), and a whole float
    into an int where it asks for an integer (JSON Schema's integer admits 16.0); after the
    checks :func:`_as_floats` makes every number where the schema asks for a number a float:
    every number then has the schema's type, so no reader casts it."""
    return _by_schema(doc, schema, schema, _coerced)


def _coerced(value: Any, schema: Mapping, root: Mapping) -> Any:
    types = _types(schema, root)
    if isinstance(value, str) and "number" in types and _NUMBER_RE.match(value.strip()):
        return float(value)
    if isinstance(value, str) and "integer" in types and re.fullmatch(r"[+-]?\d+", value.strip()):
        return int(value)
    if isinstance(value, float) and "integer" in types and "number" not in types and value.is_integer():
        return int(value)
    return value


def _as_floats(doc: Any, schema: Mapping) -> Any:
    """``doc`` with every int where the schema asks for a number (and not an integer) made a
    float (``span: 1`` is 1.0), so a reader of a number key gets a float and casts nothing.
    Run after the checks: the one that refuses an integer λ (DVC names folders by its text)
    reads the document as written."""
    return _by_schema(doc, schema, schema, _floated)


def _floated(value: Any, schema: Mapping, root: Mapping) -> Any:
    types = _types(schema, root, alternatives=True)
    if isinstance(value, int) and not isinstance(value, bool) and "number" in types and "integer" not in types:
        return float(value)
    return value


def describe(s: Mapping) -> str:
    """What a (sub)schema allows, in words: its const/enum, or type, range, pattern, sizes."""
    if "const" in s:
        return json.dumps(s["const"])
    if "enum" in s:
        return ", ".join(map(str, s["enum"]))
    parts = []
    if "type" in s:
        parts.append(" or ".join(s["type"]) if isinstance(s["type"], list) else s["type"])
    bounds = [f"{sym} {s[k]}" for k, sym in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                                              ("exclusiveMaximum", "<")) if k in s]
    if bounds:
        parts.append(" and ".join(bounds))
    if "maxLength" in s:
        parts.append(f"of at most {s['maxLength']} characters")
    if "pattern" in s:
        parts.append(f"matching {s['pattern']}")
    if "minItems" in s:
        parts.append(f"at least {s['minItems']} item(s)")
    if "minProperties" in s:
        parts.append(f"at least {s['minProperties']} key(s)")
    if s.get("uniqueItems"):
        parts.append("no duplicates")
    return " ".join(parts)


def _allowed(error: jsonschema.ValidationError) -> str:
    s = error.schema if isinstance(error.schema, Mapping) else {}
    if "anyOf" in s:
        return "allowed: " + ", or ".join(describe(alt) for alt in s["anyOf"])
    if error.validator == "additionalProperties":
        return "allowed keys: " + ", ".join(sorted(s.get("properties", {})))
    parts = describe(s)
    if parts:
        return "allowed: " + parts
    desc = " ".join(str(s.get("description", "")).split())
    return (desc.split(". ")[0] if desc else "see villani/schemas/params.schema.yaml")


def _schema_errors(doc: dict, schema: Mapping, source: str) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    e = errors[0]
    path = list(e.absolute_path)
    if e.validator == "additionalProperties":
        extra = sorted(set(e.instance) - set(e.schema.get("properties", {})))
        key = _key_of(path + extra[:1])
        raise ParamsError(f"{source}: {key}: unknown key ({_allowed(e)})")
    value = _show(e.instance) if not isinstance(e.instance, (dict,)) else "{…}"
    raise ParamsError(f"{source}: {_key_of(path)}: {value} is invalid ({_allowed(e)})")


# --------------------------------------------------------------------------- cross-key checks
def _fail(source: str, key: str, value: Any, allowed: str) -> None:
    raise ParamsError(f"{source}: {key}: {_show(value)} is invalid ({allowed})")


def _cross_checks(p: dict, source: str) -> None:

    d, m, t, me, r, la = p["data"], p["model"], p["train"], p["measure"], p["rays"], p["landscape"]
    if d["name"] == ACROSS:
        _fail(source, "data.name", d["name"], f"any other name: {ACROSS!r} is the folder of the cross-dataset "
                                              "figures and tables")
    arms = ("adamw_noise", "adam_l2", "langevin")
    for key, lams in (("train.lambdas", t["lambdas"]), *((f"train.{a}.lambdas", t[a]["lambdas"]) for a in arms),
                      ("rays.lambdas", r["lambdas"]), ("landscape.lambdas", la["lambdas"])):
        for i, lam in enumerate(lams):
            if isinstance(lam, int) and not isinstance(lam, bool):
                raise ParamsError(f"{source}: {key}[{i}]: {lam} is invalid (write λ as a float, e.g. {float(lam)!r}: "
                                  "DVC names run folders by the text of λ)")
            if not math.isfinite(lam):
                _fail(source, key, lams, "finite numbers ≥ 0")
    if d["source"] == "files" and not d["files"].get("train"):
        _fail(source, "data.files.train", d["files"].get("train"), "source `files` needs at least a train file")
    if d["tokenizer"]["kind"] == "pretrained" and not d["tokenizer"]["name"]:
        _fail(source, "data.tokenizer.name", None, "kind `pretrained` needs a tokenizer name or path")
    if m["init"] == "pretrained" and not m["name"]:
        _fail(source, "model.name", None, "init `pretrained` needs a model name or path")
    shape = None if m["name"] else shape_problem(m["config"], prefix="model.config.")
    if shape is not None:
        _fail(source, *shape)
    max_pos = m["config"].get("max_position_embeddings")
    if max_pos is not None and d["seq_len"] > max_pos:
        _fail(source, "data.seq_len", d["seq_len"], f"≤ model.config.max_position_embeddings = {max_pos}")
    if t["warmup_steps"] > t["steps"]:
        _fail(source, "train.warmup_steps", t["warmup_steps"], f"≤ train.steps = {t['steps']}")
    ck = t["checkpoints"]
    if ck["steps"] is None and ck["count"] > t["steps"]:
        _fail(source, "train.checkpoints.count", ck["count"], f"≤ train.steps = {t['steps']}")
    if ck["steps"] is not None:
        if max(ck["steps"]) != t["steps"] or any(s > t["steps"] for s in ck["steps"]):
            _fail(source, "train.checkpoints.steps", ck["steps"], f"steps in 1..{t['steps']} whose largest is train.steps")
    n_ckpt = len(checkpoint_steps(t)) - 1
    if t["segments"] > n_ckpt:
        _fail(source, "train.segments", t["segments"], f"≤ number of checkpoints after step 0 = {n_ckpt}")
    for a in arms:
        for lam in t[a]["lambdas"]:
            if lam not in t["lambdas"]:
                _fail(source, f"train.{a}.lambdas", t[a]["lambdas"], f"values from train.lambdas = {t['lambdas']}")
    for w in t["sweep"]["warmup_steps"]:
        if w > t["steps"]:
            _fail(source, "train.sweep.warmup_steps", t["sweep"]["warmup_steps"], f"values ≤ train.steps = {t['steps']}")
    if me["ds_blocks"] is not None and me["ds_blocks"] > me["blocks"]:
        _fail(source, "measure.ds_blocks", me["ds_blocks"], f"≤ measure.blocks = {me['blocks']}, or null")
    if me["lanczos_steps"] < me["top_k"]:
        _fail(source, "measure.lanczos_steps", me["lanczos_steps"], f"≥ measure.top_k = {me['top_k']}")
    if len(set(me["s_values"])) != len(me["s_values"]):
        _fail(source, "measure.s_values", me["s_values"], "no duplicates")
    if len(set(r["lambdas"])) != len(r["lambdas"]):
        _fail(source, "rays.lambdas", r["lambdas"], "no duplicates")
    if r["theta_sq_min"] >= r["theta_sq_max"]:
        _fail(source, "rays.theta_sq_min", r["theta_sq_min"], f"< rays.theta_sq_max = {r['theta_sq_max']}")
    if r["fit_points"] > r["points"]:
        _fail(source, "rays.fit_points", r["fit_points"], f"≤ rays.points = {r['points']}")
    if len(set(la["lambdas"])) != len(la["lambdas"]):
        _fail(source, "landscape.lambdas", la["lambdas"], "no duplicates")
    if "final" in la["centers"]:
        for lam in la["lambdas"]:
            if lam not in t["lambdas"]:
                _fail(source, "landscape.lambdas", la["lambdas"],
                      f"with `final` in landscape.centers, values from train.lambdas = {t['lambdas']}")


def resolve(doc: Mapping | None, *, source: str = "params") -> Params:
    """Fill defaults, coerce numeric strings, validate; return the complete parameters,
    immutable and read by key or attribute (:class:`villani.plan.frozen.Params`).

    With ``datasets``, the top-level groups are checked against the schema only, and each
    dataset's merged parameters (:func:`dataset_params`) completely."""
    schema = load_schema()
    check_values(doc or {}, source)
    p = thaw(dict(doc or {}))
    p = _coerce_numbers(p, schema)
    # validate the user's document before defaults hide a wrong type (e.g. `train: 3`)
    _schema_errors(p, _without_defaults(schema), source)
    p = _fill_defaults(p, schema)
    _schema_errors(p, schema, source)
    if p.get("datasets"):
        for name in p["datasets"]:
            dataset_params(p, name, source=source)
    else:
        _cross_checks(p, source)
    return freeze(_as_floats(p, schema))


def resolve_workflow(config: Mapping, files: Iterable[str | Path], overrides: Mapping | None) -> dict:
    """Snakemake's parameters: the files (each read by :func:`check_files`, then resolved —
    an error names the file) and the ``--config`` values over them (an error then names
    ``--config``, not a file that holds no such value)."""
    files = [str(f) for f in files]
    source = ", ".join(files) or "config"
    if not overrides:
        check_files(files)
        return resolve(config, source=source)
    if files:
        load_params(files)  # reads each file as check_files does, then resolves the files alone
    keys = ", ".join(_key_of((k,)) for k in overrides)
    return resolve(config, source=f"--config {keys} (over {source})")


def dataset_names(p: Mapping) -> list[str]:
    """The datasets of a resolved document: the keys of ``datasets``, else ``data.name``."""
    return list(p["datasets"]) if p.get("datasets") else [p["data"]["name"]]


def dataset_params(p: Mapping, name: str, *, source: str = "params") -> Params:
    """The complete parameters of dataset ``name`` of a resolved document (one ``data``
    group, as every stage reads them).

    A single-dataset document is returned as it is (``name`` must be its ``data.name``).
    With ``datasets``: the top-level groups with ``datasets[name]`` merged over them
    (:func:`deep_merge`: mappings merge key by key, lists and values replace), ``data.name``
    = ``name``, validated completely; an error names ``datasets.<name>`` and the key."""
    datasets = p.get("datasets")
    names = dataset_names(p)
    if name not in names:
        raise ParamsError(f"{source}: dataset {name!r} is not in the parameters (datasets: {', '.join(names)})")
    if not datasets:
        return p  # type: ignore[return-value]
    entry = datasets[name] or {}
    given = (entry.get("data") or {}).get("name")
    where = f"{source}: datasets.{name}"
    if given not in (None, name):
        raise ParamsError(f"{where}.data.name: {json.dumps(given)} is invalid (the entry's key {name!r} names "
                          "the dataset; leave data.name out)")
    if "formats" in (entry.get("figures") or {}):
        raise ParamsError(f"{where}.figures.formats: {json.dumps(entry['figures']['formats'])} is invalid (shared by "
                          "every dataset: set it in the top-level figures group)")
    merged = deep_merge({g: p[g] for g in GROUPS}, entry)
    merged["data"]["name"] = name
    if "jobs" in p:  # the workflow's, not a dataset's: shared as it is
        merged["jobs"] = copy.deepcopy(p["jobs"])
    schema = load_schema()
    merged = _coerce_numbers(merged, schema)
    merged = _fill_defaults(merged, schema)
    _schema_errors(merged, schema, where)
    _cross_checks(merged, where)
    merged["datasets"] = None
    return freeze(_as_floats(merged, schema))


def _without_defaults(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {k: _without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema
