"""A parameter file as it is read: YAML 1.2, whole-document checks, the schema file.

:func:`read_yaml` reads one file with ``ruamel.yaml`` (YAML 1.2, as DVC reads it: ``1e-3``
is a float) and refuses, in one line naming the file and the key, what no schema keyword
catches (:func:`check_values`: an alias bomb, NaN/±inf, control characters) and a quoted
number where the schema allows only numbers (``lambdas: [0.0, "1.2e-1"]``: text to YAML
and to DVC — DVC would name the run folder ``lam1.2e-1`` — while villani would read 0.12;
:func:`_quoted_number`). The schema itself is package data (:func:`load_schema`).
Resolving a document (defaults, validation, cross-key checks) is :mod:`villani.plan.config`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from ruamel.yaml import YAML

__all__ = ["ParamsError", "SCHEMA", "MAX_VALUES", "MAX_DEPTH", "load_schema", "read_yaml", "check_values",
           "check_files", "dump_yaml"]

SCHEMA = "schemas/params.schema.yaml"  # inside the villani package
_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


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
    quoted = _quoted_number(doc, load_schema())
    if quoted is not None:
        key, text = quoted
        raise ParamsError(f"{path}: {_key_of(key)}: {_show(text)} is invalid (allowed: a number written without "
                          "quotes; quoted it is text to YAML and to DVC, which would name a λ folder by that text)")
    return doc


def _quoted_number(doc: Any, schema: Mapping, root: Mapping | None = None, path: tuple = ()) -> tuple | None:
    """(key path, text) of the first text that reads as a number where the schema allows only
    numbers — a quoted ``"1.2e-1"`` in a YAML 1.2 file (villani's reader and DVC's agree
    that unquoted ``1e-3`` is a number; only Snakemake's PyYAML reads it as text, which
    :func:`resolve` converts)."""
    root = schema if root is None else root
    schema = _deref(schema, root)
    types = schema.get("type")
    types = {types} if isinstance(types, str) else set(types or [])
    if isinstance(doc, str):
        only_numbers = types & {"number", "integer"} and "string" not in types
        return (path, doc) if only_numbers and _NUMBER_RE.match(doc.strip()) else None
    props, extra = schema.get("properties", {}), schema.get("additionalProperties")
    items = (doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ())
    for key, value in items:
        sub = (props.get(key, extra) if isinstance(doc, dict) else schema.get("items"))
        found = _quoted_number(value, sub, root, path + (key,)) if isinstance(sub, Mapping) else None
        if found is not None:
            return found
    return None


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


def check_files(paths: Iterable[str | Path]) -> None:
    """Read each parameter file as :func:`load_params` would (for Snakemake's ``configfile:``,
    parsed by PyYAML, which takes the last of duplicate keys and an empty file as ``{}``)."""
    for path in paths:
        read_yaml(path)


def _deref(schema: Mapping, root: Mapping) -> Mapping:
    """``schema`` itself, or the subschema its local ``$ref`` (``#/properties/…``) names."""
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if not ref:
        return schema
    node = root
    for part in ref.lstrip("#/").split("/"):
        node = node[part]
    return node


def _show(value: Any, width: int = 80) -> str:
    """A value as JSON for a message, shortened to about ``width`` characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 20] + "…" + text[-10:]


def _key_of(path: Iterable) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def dump_yaml(p: Mapping, path: str | Path) -> None:
    """Write a parameter dict as YAML (used by tests and `villani validate --print`)."""
    with open(path, "w") as f:
        _yaml().dump(json.loads(json.dumps(p)), f)
