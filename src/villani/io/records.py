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
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

from villani.io import atomic

__all__ = ["RECORD_HASH", "canonical", "record_hash", "sealed", "write_sealed", "check_sealed"]

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


def write_sealed(path: str | Path, record: Mapping) -> dict:
    """Write ``record`` sealed (atomically, :func:`villani.io.atomic.write_json`); return it."""
    out = sealed(record)
    atomic.write_json(path, out)
    return out


def check_sealed(record: Mapping, path, what: str, rewrite: str) -> str:
    """The record's ``record_sha256``, once it is checked; a one-line ValueError when it is
    missing (written before records carried it) or does not match the content (edited)."""
    got = record.get(RECORD_HASH)
    if got is None:
        raise ValueError(f"{path}: {what} carries no {RECORD_HASH} (written by an older villani, or not by "
                         f"villani), so it cannot prove its content; {rewrite}")
    if got != record_hash(record):
        raise ValueError(f"{path}: {what} was changed after it was written ({RECORD_HASH} does not match its "
                         f"content: edited by hand or damaged); {rewrite}")
    return str(got)
