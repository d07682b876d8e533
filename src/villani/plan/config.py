"""Parameters: load, merge, fill defaults, validate — one module for Snakemake, DVC and the CLI.

The parameter documentation is the JSON schema ``villani/schemas/params.schema.yaml``
(package data, read with :mod:`importlib.resources`, so an installed wheel has it):
every key carries a description and a default. :func:`resolve` fills those defaults,
validates types and ranges against the schema, then runs the cross-key checks a schema
cannot express (checkpoint count vs steps, Lanczos steps vs k, …). Every failure is a
:class:`ParamsError` whose message is one line naming the file, the key, the value and
what is allowed.

YAML is read as YAML 1.2 (``ruamel.yaml``), so ``1e-3`` is a float as in DVC. Documents
parsed elsewhere with PyYAML (Snakemake's ``configfile:``) may carry such numbers as
strings; :func:`resolve` converts numeric strings where the schema asks for a number.

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
from typing import Any, Iterable, Mapping

import jsonschema
from ruamel.yaml import YAML

from villani.plan.layout import ACROSS
from villani.plan.schedule import checkpoint_steps

SCHEMA = "schemas/params.schema.yaml"  # inside the villani package

_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


GROUPS = ("data", "model", "train", "measure", "rays", "landscape", "bounds", "figures", "claims")


class ParamsError(ValueError):
    """A parameter document is invalid; ``str(err)`` is one line naming the key."""


def _yaml() -> YAML:
    y = YAML(typ="safe", pure=True)
    return y


def load_schema() -> dict:
    from importlib.resources import files

    return _yaml().load(files("villani").joinpath(SCHEMA).read_text(encoding="utf-8"))


def read_yaml(path: str | Path) -> dict:
    """Read one YAML mapping; a missing, malformed or empty file, a duplicate key (named
    with its line) or aliases expanding past :data:`MAX_VALUES` values is a one-line
    ParamsError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ParamsError(f"{path}: cannot read parameter file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ParamsError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    try:
        doc = _yaml().load(text)
    except Exception as e:  # ruamel raises several classes; report the problem and its line
        raise ParamsError(f"{path}: not valid YAML ({_yaml_problem(e)})") from None
    if doc is None:
        raise ParamsError(f"{path}: empty parameter file (write at least one group, e.g. `train: {{steps: 240}}`; "
                          "an empty file would silently run the schema defaults)")
    if not isinstance(doc, dict):
        raise ParamsError(f"{path}: top level must be a mapping of groups, got {type(doc).__name__}")
    check_values(doc, str(path))
    return doc


def _yaml_problem(e: Exception) -> str:
    """One line from a ruamel error: its problem and the line it points at (duplicate keys:
    the key, its line and the line of the first occurrence)."""
    problem, mark = getattr(e, "problem", None), getattr(e, "problem_mark", None)
    context = getattr(e, "context_mark", None)
    if problem and mark is not None:
        where = f"line {mark.line + 1}"
        if "duplicate key" in problem:
            key = problem.split(" with value ")[0].replace("found duplicate key", "duplicate key")
            return f"{where}: {key}" + (f" in the mapping starting at line {context.line + 1}" if context else "")
        return f"{where}: {problem}"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


MAX_VALUES = 100_000  # values a parameter document may hold, aliases expanded
MAX_DEPTH = 32  # nesting of mappings and lists
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_values(doc: Any, source: str) -> None:
    """Refuse what no schema keyword catches, in one walk with aliases expanded: more than
    :data:`MAX_VALUES` values or :data:`MAX_DEPTH` levels (a YAML alias bomb, a recursive
    alias: every digest would expand it), a NaN or ±inf anywhere (every range check passes
    NaN), and a control character (a newline splits a shell line) in any text or key."""
    count = 0

    def walk(node: Any, path: tuple, depth: int) -> None:
        nonlocal count
        count += 1
        if count > MAX_VALUES:
            top = path[:next((i for i, k in enumerate(path) if isinstance(k, int)), len(path))]
            raise ParamsError(f"{source}: {_key_of(top)}: more than {MAX_VALUES} values with YAML aliases expanded "
                              "(allowed: a parameter document, not an alias bomb)")
        if depth > MAX_DEPTH:
            raise ParamsError(f"{source}: {_key_of(path)}: nested deeper than {MAX_DEPTH} levels (a recursive alias?)")
        if isinstance(node, float) and not math.isfinite(node):
            raise ParamsError(f"{source}: {_key_of(path)}: {node} is invalid (allowed: finite numbers)")
        if isinstance(node, str) and _CONTROL.search(node):
            raise ParamsError(f"{source}: {_key_of(path)}: {_show(node)} is invalid (allowed: text without "
                              "newlines or other control characters)")
        if isinstance(node, Mapping):
            for k, v in node.items():
                if isinstance(k, str) and _CONTROL.search(k):
                    raise ParamsError(f"{source}: {_key_of(path)}: key {_show(k)} is invalid (allowed: keys "
                                      "without newlines or other control characters)")
                walk(v, path + (k,), depth + 1)
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, path + (i,), depth + 1)

    walk(doc, (), 0)


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """Recursively merge ``override`` into a copy of ``base`` (mappings merge, the rest replaces)."""
    out = copy.deepcopy(dict(base))
    for k, v in override.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def check_files(paths: Iterable[str | Path]) -> None:
    """Read each parameter file as :func:`load_params` would (for Snakemake's ``configfile:``,
    parsed by PyYAML, which takes the last of duplicate keys and an empty file as ``{}``)."""
    for path in paths:
        read_yaml(path)


def load_params(paths: Iterable[str | Path]) -> dict:
    """Load and merge parameter files in order (later files override), then :func:`resolve`."""
    paths = list(paths)
    merged: dict = {}
    for p in paths:
        merged = deep_merge(merged, read_yaml(p))
    return resolve(merged, source=", ".join(str(p) for p in paths) or "params")


# --------------------------------------------------------------------------- defaults
def _fill_defaults(doc: Any, schema: Mapping) -> Any:
    if schema.get("type") == "object" or "properties" in schema:
        if doc is None and "default" in schema:
            doc = copy.deepcopy(schema["default"])
        if not isinstance(doc, dict):
            return doc
        for key, sub in schema.get("properties", {}).items():
            if key not in doc:
                if "default" in sub:
                    doc[key] = copy.deepcopy(sub["default"])
                else:
                    continue
            doc[key] = _fill_defaults(doc[key], sub)
    return doc


def _deref(schema: Mapping, root: Mapping) -> Mapping:
    """``schema`` itself, or the subschema its local ``$ref`` (``#/properties/…``) names."""
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if not ref:
        return schema
    node = root
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _coerce_numbers(doc: Any, schema: Mapping, root: Mapping | None = None) -> Any:
    """Turn numeric strings into numbers where the schema asks for a number (PyYAML's 1e-3)."""
    root = schema if root is None else root
    schema = _deref(schema, root)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if isinstance(doc, str) and "number" in types and _NUMBER_RE.match(doc.strip()):
        return float(doc)
    if isinstance(doc, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key in doc:
            sub = props.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                doc[key] = _coerce_numbers(doc[key], sub, root)
    if isinstance(doc, list) and isinstance(schema.get("items"), Mapping):
        return [_coerce_numbers(x, schema["items"], root) for x in doc]
    return doc


def _show(value: Any, width: int = 80) -> str:
    """A value as JSON for a message, shortened to about ``width`` characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 20] + "…" + text[-10:]


def _key_of(path: Iterable) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _describe(s: Mapping) -> str:
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
        return "allowed: " + ", or ".join(_describe(alt) for alt in s["anyOf"])
    if error.validator == "additionalProperties":
        return "allowed keys: " + ", ".join(sorted(s.get("properties", {})))
    parts = _describe(s)
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
    if la["center"] == "final":
        for lam in la["lambdas"]:
            if lam not in t["lambdas"]:
                _fail(source, "landscape.lambdas", la["lambdas"], f"with center `final`, values from train.lambdas = {t['lambdas']}")


def resolve(doc: Mapping | None, *, source: str = "params") -> dict:
    """Fill defaults, coerce numeric strings, validate; return the complete parameter dict.

    With ``datasets``, the top-level groups are checked against the schema only, and each
    dataset's merged parameters (:func:`dataset_params`) completely."""
    schema = load_schema()
    check_values(doc or {}, source)
    p = copy.deepcopy(dict(doc or {}))
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
    return p


def dataset_names(p: Mapping) -> list[str]:
    """The datasets of a resolved document: the keys of ``datasets``, else ``data.name``."""
    return list(p["datasets"]) if p.get("datasets") else [p["data"]["name"]]


def dataset_params(p: Mapping, name: str, *, source: str = "params") -> dict:
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
    return merged


def _without_defaults(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {k: _without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema


def dump_yaml(p: Mapping, path: str | Path) -> None:
    """Write a parameter dict as YAML (used by tests and `villani validate --print`)."""
    with open(path, "w") as f:
        _yaml().dump(json.loads(json.dumps(p)), f)
