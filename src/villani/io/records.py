"""A record's hash of itself, and the hashes of what it was computed from.

Every record a stage writes for a later stage to trust (a measure JSON, ``bounds.json``,
the claims ledger) carries ``record_sha256``: the sha256 of its *canonical form* — the
record without that key, with NaN as ``null`` and ±inf as ``"inf"``/``"-inf"`` (what
:func:`villani.io.atomic.write_json` writes), serialised with sorted keys, no whitespace,
UTF-8 and Python's shortest round-trip float repr. The form is a function of the parsed
JSON alone, so the hash computed before writing is the hash of what a reader parses back,
whatever the indentation on disk:

.. math::
    h(r) = \\operatorname{sha256}(\\operatorname{canon}(r \\setminus \\{\\texttt{record\\_sha256}\\})),
    \\qquad \\operatorname{canon}(\\operatorname{parse}(\\operatorname{write}(r)))
    = \\operatorname{canon}(r).

A reader (:func:`check_sealed`) recomputes it: a value edited by hand (``val_ppl`` × 0.5)
is one line naming the file. The hash proves the record is the one its writer wrote, not
that its inputs are still there: each reader also checks the link it relies on (a measure
JSON's ``weights_sha256`` against its checkpoint, ``bounds.json``'s list of measure JSONs
against the files, :mod:`villani.io.results`).

**What a record holds** is its JSON Schema, shipped as package data
``villani/schemas/<kind>.schema.yaml`` (:data:`KINDS`; the value kinds they share —
numbers or ``"inf"``/``"-inf"``, sha256 digests, intervals — in ``records.defs.yaml``).
:func:`check` validates a record against it on write (:func:`write_record`,
:func:`write_sealed`, before the atomic write) and on read (:mod:`villani.io.results`), so
a record written by hand, by another version or damaged on disk is one ``ValueError`` line
``"<file>: <key>: <value> is invalid (expected <what>)"`` (or ``"<file>: <key>: missing
(expected <what>)"``). The docs' record reference is rendered from the same schemas
(:mod:`villani.io.record_docs`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from importlib.resources import files
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from villani.io import atomic
from villani.plan.params_file import _key_of  # a key path as the parameter errors write it: a.b[0].c

__all__ = ["RECORD_HASH", "KINDS", "schema", "check", "write_record", "canonical", "record_hash", "sealed",
           "write_sealed", "check_sealed", "ValueKind", "value_kind", "load_schema_file"]

#: The record kinds with a shipped schema ``villani/schemas/<kind>.schema.yaml``.
KINDS = ("measure", "checkpoint", "segment", "data_stats", "bounds", "claims", "ray_slopes", "surface", "pretrained",
         "fetch", "plan")

RECORD_HASH = "record_sha256"


def canonical(record: Mapping) -> bytes:
    """The canonical form of ``record`` (module doc), without its ``record_sha256``."""
    body = {k: v for k, v in record.items() if k != RECORD_HASH}
    return json.dumps(atomic.finite_json(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def record_hash(record: Mapping) -> str:
    """sha256 (64 hex) of :func:`canonical`."""
    return hashlib.sha256(canonical(record)).hexdigest()


def sealed(record: Mapping) -> dict:
    """``record`` with its ``record_sha256``."""
    return {**record, RECORD_HASH: record_hash(record)}


def write_sealed(path: str | Path, record: Mapping, kind: str) -> dict:
    """Write ``record`` sealed (atomically, :func:`villani.io.atomic.write_json`), checked
    against the schema of ``kind`` first; return it."""
    return write_record(path, sealed(record), kind)


def write_record(path: str | Path, record: Mapping, kind: str) -> dict:
    """Write ``record`` (atomically, :func:`villani.io.atomic.write_json`) once it is checked
    against the schema of ``kind`` in the form written; return it."""
    check(kind, atomic.finite_json(dict(record)), path)
    atomic.write_json(path, record)
    return dict(record)


# --------------------------------------------------------------------------- schemas
def _load_yaml(name: str) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(files("villani").joinpath("schemas", name).read_text(encoding="utf-8"))


def load_schema_file(name: str) -> dict:
    """The shipped schema file ``villani/schemas/<name>`` with the shared value kinds in its ``$defs``."""
    doc = _load_yaml(name)
    doc["$defs"] = {**_load_yaml("records.defs.yaml")["$defs"], **doc.get("$defs", {})}
    return doc


@functools.cache
def schema(kind: str) -> dict:
    """The JSON Schema of a record ``kind`` (:data:`KINDS`), with the shared value kinds."""
    if kind not in KINDS:
        raise ValueError(f"no record schema {kind!r} (expected one of {', '.join(KINDS)})")
    return load_schema_file(f"{kind}.schema.yaml")


@functools.cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(kind))


def check(kind: str, doc: Any, path) -> Any:
    """``doc`` when it is a valid record of ``kind``; else a one-line ValueError naming
    ``path``, the key, the value and what the schema allows (module doc)."""
    errors = list(_validator(kind).iter_errors(doc))
    if not errors:
        return doc
    e = min(errors, key=lambda e: (len(e.absolute_path) + (e.validator == "required"), list(map(str, e.absolute_path))))
    where = list(e.absolute_path)
    if e.validator == "required":
        key = next(k for k in e.validator_value if not (isinstance(e.instance, Mapping) and k in e.instance))
        extra = e.schema.get("additionalProperties")
        sub = (e.schema.get("properties") or {}).get(key, extra if isinstance(extra, Mapping) else {})
        raise ValueError(f"{path}: {_key_of(where + [key])}: missing (expected {_expected(kind, sub)})")
    if e.validator == "additionalProperties" and isinstance(e.instance, Mapping):
        extra = sorted(set(e.instance) - set(e.schema.get("properties", {})))
        raise ValueError(f"{path}: {_key_of(where + extra[:1])}: unknown key (expected the keys of "
                         f"villani/schemas/{kind}.schema.yaml)")
    raise ValueError(f"{path}: {_key_of(where)}: {_shown(e.instance)} is invalid "
                     f"(expected {_expected(kind, _owner(kind, e))})")


def _owner(kind: str, error: jsonschema.ValidationError) -> Mapping:
    """The schema whose words describe a failed value: the outermost one with a title or a
    ``anyOf`` on the error's path (a nullable number fails inside its ``anyOf``)."""
    while error.parent is not None and len(error.parent.absolute_path) == len(error.absolute_path):
        error = error.parent
    return _resolve(kind, error.schema if isinstance(error.schema, Mapping) else {})


def _document(kind: str | Mapping) -> Mapping:
    """The schema of a record ``kind``, or ``kind`` itself when it is a schema document (a table's)."""
    return kind if isinstance(kind, Mapping) else schema(kind)


def _resolve(kind: str | Mapping, s: Mapping, *, through_titles: bool = False) -> Mapping:
    """``s`` with its ``$ref`` followed (to the first schema with a title, unless ``through_titles``)."""
    while "$ref" in s and (through_titles or "title" not in s):
        s = _document(kind)["$defs"][s["$ref"].rsplit("/", 1)[-1]]
    return s


@dataclasses.dataclass(frozen=True)
class ValueKind:
    """What a (sub)schema lets a value be: ``kinds`` ⊆ {integer, number, text, boolean, object,
    array} (a number admits ``"inf"``/``"-inf"``), whether ``null`` is allowed, the ``minimum``
    and ``maximum`` of a number and the ``enum`` of a text."""
    kinds: frozenset
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple | None = None

    @property
    def scalar(self) -> bool:
        return bool(self.kinds) and self.kinds <= {"integer", "number", "text", "boolean"}

    @property
    def numeric(self) -> bool:
        return bool(self.kinds) and self.kinds <= {"integer", "number"}


_TYPE_KINDS = {"integer": "integer", "number": "number", "string": "text", "boolean": "boolean", "object": "object",
               "array": "array"}


def value_kind(kind: str | Mapping, s: Mapping) -> ValueKind:
    """The :class:`ValueKind` of the (sub)schema ``s`` of record ``kind`` (or of schema document ``kind``)."""
    kinds, nullable, bounds, enum = set(), False, {}, []
    for alt in _resolve(kind, s, through_titles=True).get("anyOf") or [_resolve(kind, s, through_titles=True)]:
        alt = _resolve(kind, alt, through_titles=True)
        if "anyOf" in alt:
            sub = value_kind(kind, alt)
            kinds |= sub.kinds
            nullable |= sub.nullable
            bounds.update({k: v for k, v in (("minimum", sub.minimum), ("maximum", sub.maximum)) if v is not None})
            enum += list(sub.enum or ())
            continue
        values = alt.get("enum", [alt["const"]] if "const" in alt else None)
        if values is not None:
            words = [v for v in values if v not in ("inf", "-inf", None)]
            kinds |= {"number"} if not words else {"text"} if all(isinstance(v, str) for v in words) else set()
            nullable |= None in values
            enum += words
        types = alt.get("type", [])
        for t in [types] if isinstance(types, str) else types:
            nullable |= t == "null"
            kinds |= {_TYPE_KINDS[t]} if t in _TYPE_KINDS else set()
        bounds.update({k: alt[k] for k in ("minimum", "maximum") if k in alt})
    return ValueKind(frozenset(kinds), nullable, bounds.get("minimum"), bounds.get("maximum"),
                     tuple(enum) if enum and kinds == {"text"} else None)


def _expected(kind: str | Mapping, s: Mapping) -> str:
    """What a (sub)schema allows, in words."""
    s = _resolve(kind, s)
    if "title" in s and s is not _document(kind):  # the top level's title is the file's name
        return s["title"]
    if "enum" in s:
        return "one of " + ", ".join(map(str, s["enum"]))
    types = s.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    null = " or null" if "null" in types else ""
    if "integer" in types:
        lo, hi = s.get("minimum"), s.get("maximum")
        rng = "" if lo is None and hi is None else f" in [{'-∞' if lo is None else lo}, {'∞' if hi is None else hi}]"
        return f"an integer{rng}{null}"
    words = {"object": "an object", "array": "a list", "string": "text", "number": "a number", "boolean": "true or false"}
    return " or ".join(words.get(t, t) for t in types if t != "null") + null or "see the schema"


def _shown(value: Any, width: int = 60) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    t = json.dumps(value, default=lambda o: type(o).__name__)
    return t if len(t) <= width else t[: width - 15] + "…" + t[-10:]


def check_sealed(record: Mapping, path, what: str, rewrite: str) -> str:
    """The record's ``record_sha256`` (which its schema requires), once it is checked; a
    one-line ValueError when it is missing or does not match the content (edited)."""
    got = record.get(RECORD_HASH)
    if got is None:
        raise ValueError(f"{path}: {RECORD_HASH}: missing (expected a sha256: 64 hex digits, which proves its "
                         f"content); {rewrite}")
    if got != record_hash(record):
        raise ValueError(f"{path}: {what} was changed after it was written ({RECORD_HASH} does not match its "
                         f"content: edited by hand or damaged); {rewrite}")
    return str(got)
