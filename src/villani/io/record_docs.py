"""The record reference of ``docs/records.md``, rendered from the shipped record schemas.

Each record kind of :data:`villani.io.records.KINDS` becomes a section: the file's name
and what it is (the schema's ``title`` and ``description``), then one row per key — its
name (``trace_L.mean`` for a key of a nested object), the values it may hold (the words of
a failed check, :func:`villani.io.records.check`) and its meaning (the key's
``description``). The schemas are the one place a record's keys are written down; the
docs-in-sync test regenerates the reference and compares:
``python -c "from villani.io.record_docs import write_reference; write_reference('docs/records.md')"``.
"""

from __future__ import annotations

from typing import Mapping

from villani.io import atomic
from villani.io.records import KINDS, _expected, _resolve, schema

__all__ = ["START", "END", "reference_markdown", "write_reference"]

START, END = "<!-- records:start -->", "<!-- records:end -->"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _rows(kind: str, props: Mapping, prefix: str = "") -> list[str]:
    out = []
    for key, sub in props.items():
        target = _resolve(kind, {"$ref": sub["$ref"]}) if "$ref" in sub else sub
        meaning = sub.get("description") or target.get("description") or ""
        if prefix and not meaning:
            continue
        out.append(f"| `{prefix}{key}` | {_cell(_expected(kind, sub))} | {_cell(meaning)} |")
        nested = target.get("properties") or (target.get("items") or {}).get("properties") or {}
        out += _rows(kind, nested, f"{prefix}{key}{'[]' if 'items' in target and 'properties' not in target else ''}.")
    return out


def reference_markdown() -> str:
    """The reference of every record kind (module doc), as Markdown."""
    lines = []
    for kind in KINDS:
        s = schema(kind)
        lines += [f"## `{s['title']}`", "", _cell(s["description"]), "",
                  f"Schema: `villani/schemas/{kind}.schema.yaml`; required: "
                  + ", ".join(f"`{k}`" for k in s.get("required", [])) + ".", "",
                  "| key | holds | meaning |", "|---|---|---|", *_rows(kind, s["properties"]), ""]
    return "\n".join(lines)


def write_reference(path) -> None:
    """Put :func:`reference_markdown` between the markers of ``path`` (docs/records.md)."""
    atomic.replace_marked(path, START, END, reference_markdown())
