"""Atomic file writes and content hashes.

A file is written to a temporary name in the same folder, flushed and fsync'ed, then
renamed over the target with ``os.replace`` (atomic on POSIX), and the folder is fsync'ed.
A reader therefore sees either the old complete file or the new complete file, never a
half-written one — also when the writer is killed or the disk fills mid-write (the
temporary file is removed and the error propagates, naming the target file).

The temporary file is created with mode 0666 filtered by the process umask, as ``open``
would create the target itself (0644 under the usual umask 022, group-readable on a
shared cluster) — not 0600 as :func:`tempfile.mkstemp` would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
from pathlib import Path
from typing import Any, Callable, Iterator


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success fsync it and rename it into place."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temp(target)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(e, OSError) and e.filename is None:  # a write to an open file names none: name the target
            raise OSError(e.errno, e.strerror, str(target)) from e
        raise


def _create_temp(target: Path) -> Path:
    """A new empty file ``.<name>.<random>.tmp`` beside ``target``, mode 0666 & ~umask."""
    while True:
        tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue


_TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{12}\.tmp\Z", re.S)


def remove_stale_temps(folder: str | Path) -> list[Path]:
    """Remove the temporaries ``.<name>.<12 hex>.tmp`` in ``folder`` (not below it) that a
    writer killed mid-write left behind (SIGKILL skips :func:`atomic_path`'s cleanup); return
    them. Only for a folder the caller is the one writer of, e.g. a training job's own
    checkpoint folder: a live writer's temporary would be removed under it."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [p for p in folder.iterdir() if _TEMP_NAME.match(p.name) and p.is_file()]
    for p in stale:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    return stale


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes(target: str | Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | Path, text: str) -> None:
    write_bytes(target, text.encode())


def replace_marked(target: str | Path, start: str, end: str, body: str) -> None:
    """Put ``body`` between the ``start`` and ``end`` marker lines of a text file (a generated
    part of a document); a file without both markers is a one-line ValueError."""
    p = Path(target)
    text = p.read_text()
    if start not in text or end not in text:
        raise ValueError(f"{p}: no '{start}' … '{end}' markers")
    head, rest = text.split(start, 1)
    write_text(p, head + start + "\n" + body + end + rest.split(end, 1)[1])


def finite_json(obj: Any) -> Any:
    """``obj`` as :func:`write_json` writes it: NaN → null, ±inf → "inf"/"-inf", keys as text."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def write_json(target: str | Path, obj: Any) -> None:
    """Write JSON atomically; ±inf become the strings "inf"/"-inf" (strict JSON has none)."""
    write_text(target, json.dumps(finite_json(obj), indent=2, sort_keys=True) + "\n")


def write_with(target: str | Path, writer: Callable[[Path], None]) -> None:
    """Let ``writer(tmp_path)`` produce the file, then move it into place atomically."""
    with atomic_path(target) as tmp:
        writer(tmp)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def read_json(path: str | Path, what: str = "JSON file") -> Any:
    """Read JSON; a missing, truncated or malformed file is a one-line ValueError naming it."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ValueError(f"{path}: {what} not found") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read {what} ({e.strerror})") from None
    try:
        doc = json.loads(text, parse_constant=_NonFinite)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {what} is corrupt or truncated (JSON error at line {e.lineno}: {e.msg})") from None
    bad = _first_non_finite(doc)
    if bad is not None:
        key, const = bad
        raise ValueError(f"{path}: {key or '(top level)'}: {const} is invalid (expected a number; villani writes "
                         "undefined values as null and ±inf as \"inf\"/\"-inf\", never NaN)")
    return doc


class _NonFinite(str):
    """A JSON constant NaN, Infinity or -Infinity (Python's reader accepts them; strict JSON has none)."""


def _first_non_finite(obj: Any, key: str = "") -> tuple[str, str] | None:
    if isinstance(obj, _NonFinite):
        return key, str(obj)
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        found = _first_non_finite(v, f"{key}[{k}]" if isinstance(k, int) else (f"{key}.{k}" if key else str(k)))
        if found is not None:
            return found
    return None
