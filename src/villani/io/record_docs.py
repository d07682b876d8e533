"""The record reference of ``docs/records.md``, rendered from the shipped record and table schemas.

Each record kind of :data:`villani.io.records.KINDS`, then each table of
:data:`villani.io.tables.TABLES`, becomes a section: the file's name and what it is (the
schema's ``title`` and ``description``), then one row per key or column — its name
(``trace_L.mean`` for a key of a nested object; a column named after a parameter by its
pattern), the values it may hold (the words of a failed check,
:func:`villani.io.records.check`), whether its readers need it (the schema's ``required``: a
record or table without it is refused on read) and its meaning (the key's ``description``).
The schemas are the one place a record's keys and a table's columns are written down;
``villani docs`` renders the reference (:mod:`villani.cli.reference`) and ``villani docs
--check`` fails when it is out of date.
"""

from __future__ import annotations

from typing import Mapping

from villani.io import atomic
from villani.io.records import KINDS, _expected, _resolve, schema

__all__ = ["START", "END", "reference_markdown", "write_reference"]

START, END = "<!-- records:start -->", "<!-- records:end -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(kind, props: Mapping, required=(), prefix: str = "") -> list[str]:
    out = []
    for key, sub in props.items():
        target = _resolve(kind, {"$ref": sub["$ref"]}) if "$ref" in sub else sub
        meaning = sub.get("description") or target.get("description") or ""
        if prefix and not meaning:
            continue
        name = f"pattern `{key}`" if key.startswith("^") else f"`{prefix}{key}`"
        out.append(f"| {name} | {_cell(_expected(kind, sub))} | {'yes' if key in required else ''} | {_cell(meaning)} |")
        inner = target if "properties" in target else target.get("items") or {}
        out += _rows(kind, inner.get("properties") or {}, inner.get("required", ()),
                     f"{prefix}{key}{'[]' if 'items' in target and 'properties' not in target else ''}.")
    return out


def _section(kind, s: Mapping, source: str) -> list[str]:
    required = s.get("required", [])
    columns = {**s["properties"], **s.get("patternProperties", {})}
    return [f"### `{s['title']}`", "", _cell(s["description"]), "",
            f"Schema: `villani/schemas/{source}`" + (f" ({s['format']})" if "format" in s else "")
            + f"; {len(required)} of {len(s['properties'])} {'columns' if 'format' in s else 'keys'} required.", "",
            "| key | holds | required | meaning |", "|---|---|---|---|", *_rows(kind, columns, required), ""]


def reference_markdown() -> str:
    """The reference of every record kind and every table (module doc), as Markdown."""
    from villani.io import tables

    lines = ["## Records", ""]
    for kind in KINDS:
        lines += _section(kind, schema(kind), f"{kind}.schema.yaml")
    lines += ["## Tables", ""]
    for name in tables.TABLES:
        s = tables.schema(name)
        lines += _section(s, s, f"{name}.table.yaml")
    return "\n".join(lines)


def write_reference(path) -> None:
    """Put :func:`reference_markdown` between the markers of ``path`` (docs/records.md)."""
    atomic.replace_marked(path, START, END, reference_markdown())
