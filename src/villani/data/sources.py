"""Raw text per split, read from the configured source.

``read_splits(data_cfg)`` returns ``{split: SplitText}`` for the three splits
``train``, ``validation`` and ``test``. A split is a list of *documents* (strings);
documents that are empty or whitespace-only are dropped (WikiText's blank rows).

Sources (``data.source``):

- ``builtin:pydoc`` — the text of ``pydoc_data.topics.topics`` (CPython's own
  documentation topics, shipped with every interpreter): one document per topic, in
  sorted key order. It has no validation/test split.
- ``hf:<dataset>[:<config>]`` — ``datasets.load_dataset(<dataset>, <config>)``; the
  documents are the rows of ``data.text_column`` of the splits ``train``,
  ``validation`` (or ``valid``/``dev``/``val``) and ``test``. Examples:
  ``hf:ptb_text_only`` (column ``sentence``),
  ``hf:Salesforce/wikitext:wikitext-103-raw-v1`` (column ``text``). Because
  ``load_dataset`` also accepts a local directory of data files (``train.parquet``,
  ``validation.jsonl``, ``test.txt``, … — the split is taken from the file name),
  ``hf:/path/to/dir`` reads local data through the very same code path, offline; a
  ``<dataset>`` that exists as a local path is never split at ``:``.
- ``hf-disk:<dir>`` — ``datasets.load_from_disk(<dir>)`` of a ``DatasetDict`` (its
  splits) or a single ``Dataset`` (taken as train) written with ``save_to_disk``.
- ``files`` (or ``files:``) — local UTF-8 text files per split from ``data.files``
  (``{train: [paths], validation: [...], test: [...]}``, a split may be one path or a
  list; glob patterns are expanded in sorted order); each file is one document.
  Relative paths are relative to the current directory (the workflow's root).

A split the source lacks (validation/test) is carved deterministically from the *end*
of train's text: with C the number of characters of train, the last
``round(C·f_test)`` characters become test and the ``round(C·f_validation)`` before
them validation (``data.split_fractions``), i.e. the order is train | validation |
test. A cut moves back to the start of the line (or document) it falls in, so a tail
holds at least its share and whole lines/documents move; only when that line is the
first of train's first document (e.g. a corpus that is one single line) is the cut made
inside it, at the exact character.
"""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPLITS = ("train", "validation", "test")
DEFAULT_SPLIT_FRACTION = 0.05
_SPLIT_ALIASES = {
    "train": ("train",),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test",),
}


@dataclass
class SplitText:
    """The documents of one split and where they came from (``source`` or ``carved``)."""

    documents: list[str]
    origin: str = "source"

    @property
    def characters(self) -> int:
        return sum(len(d) for d in self.documents)

    def sha256(self) -> str:
        """sha256 of the documents, UTF-8, each followed by a NUL byte."""
        h = hashlib.sha256()
        for d in self.documents:
            h.update(d.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()


def read_splits(data_cfg: dict[str, Any]) -> dict[str, SplitText]:
    """Read the configured source and return the documents of train, validation and test."""
    source = str(data_cfg.get("source", "builtin:pydoc"))
    if source == "builtin:pydoc":
        raw = {"train": _pydoc_documents()}
    elif source.startswith("hf:"):
        raw = _hf_documents(source[3:], str(data_cfg.get("text_column") or "text"), disk=False)
    elif source.startswith("hf-disk:"):
        raw = _hf_documents(source[8:], str(data_cfg.get("text_column") or "text"), disk=True)
    elif source in ("files", "files:"):
        raw = _file_documents(data_cfg.get("files") or {})
    else:
        raise ValueError(
            f"data.source: unknown source {source!r} (expected builtin:pydoc, hf:<dataset>[:<config>], hf-disk:<dir> or files)"
        )
    splits = {name: SplitText(_clean(docs)) for name, docs in raw.items() if docs is not None}
    fractions = data_cfg.get("split_fractions") or {}
    return carve_missing(splits, {s: float(fractions.get(s, DEFAULT_SPLIT_FRACTION)) for s in SPLITS[1:]})


def _clean(docs) -> list[str]:
    return [d for d in docs if isinstance(d, str) and d.strip()]


def carve_missing(splits: dict[str, SplitText], fractions: dict[str, float]) -> dict[str, SplitText]:
    """Fill the splits missing from ``splits`` by cutting them off the end of train.

    Fractions are of train's characters *before* carving; test is the tail, validation
    the part just before it. Returns a new dict with all three splits.
    """
    if "train" not in splits:
        raise ValueError("data.source: the source has no train split")
    train = list(splits["train"].documents)
    total = sum(len(d) for d in train)
    out = dict(splits)
    for name in reversed(SPLITS[1:]):  # test first: it is the very end
        if name in splits:
            continue
        want = round(total * fractions.get(name, 0.0))
        train, tail = _cut_tail(train, want)
        out[name] = SplitText(tail, origin="carved")
    out["train"] = SplitText(train, origin=splits["train"].origin)
    return {name: out[name] for name in SPLITS}


def _cut_tail(docs: list[str], want: int) -> tuple[list[str], list[str]]:
    """Split ``docs`` into (head, tail) with about ``want`` characters in the tail."""
    if want <= 0:
        return docs, []
    tail: list[str] = []
    head = list(docs)
    need = want
    while head and need > 0:
        last = head.pop()
        if len(last) <= need:
            tail.insert(0, last)
            need -= len(last)
            continue
        cut = last.rfind("\n", 0, len(last) - need) + 1  # start of the line the cut falls in
        if cut == 0 and not head:  # one long line is all train has left: cut inside it
            cut = len(last) - need
        front, back = last[:cut], last[cut:]
        tail.insert(0, back)
        if front:
            head.append(front)
        need = 0
    return head, tail


def _pydoc_documents() -> list[str]:
    from pydoc_data.topics import topics

    return [topics[key] for key in sorted(topics)]


def _hf_documents(spec: str, column: str, *, disk: bool) -> dict[str, list[str]]:
    import datasets

    if not spec:
        raise ValueError("data.source: empty dataset name after 'hf:'")
    if disk:
        try:
            loaded = datasets.load_from_disk(spec)
        except FileNotFoundError as e:
            raise ValueError(f"data.source: hf-disk:{spec}: {e}") from None
        what = f"hf-disk:{spec}"
    else:
        name, config = spec, None
        if not Path(spec).exists() and ":" in spec:
            name, config = spec.split(":", 1)
        loaded = datasets.load_dataset(name, config)
        what = f"hf:{spec}"
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    out: dict[str, list[str]] = {}
    for split in SPLITS:
        found = next((a for a in _SPLIT_ALIASES[split] if a in loaded), None)
        if found is None:
            continue
        ds = loaded[found]
        if column not in ds.column_names:
            raise ValueError(
                f"data.text_column: {what} split {found!r} has no column {column!r} (columns: {', '.join(ds.column_names)})"
            )
        out[split] = ds[column]
    if "train" not in out:
        raise ValueError(f"data.source: {what} has no train split (splits: {', '.join(loaded)})")
    return out


def _file_documents(files: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for split in SPLITS:
        spec = files.get(split)
        if spec is None:
            continue
        paths = _expand(spec, split)
        out[split] = [p.read_text(encoding="utf-8") for p in paths]
    if "train" not in out:
        raise ValueError("data.files.train: source 'files' needs at least one train file")
    return out


def _expand(spec: str | list[str], split: str) -> list[Path]:
    items = [spec] if isinstance(spec, (str, Path)) else list(spec)
    paths: list[Path] = []
    for item in items:
        item = str(item)
        if glob.has_magic(item):
            matched = sorted(glob.glob(item))
            if not matched:
                raise ValueError(f"data.files.{split}: pattern {item!r} matches no file")
            paths.extend(Path(m) for m in matched)
        else:
            path = Path(item)
            if not path.is_file():
                raise ValueError(f"data.files.{split}: {item} is not a file")
            paths.append(path)
    if not paths:
        raise ValueError(f"data.files.{split}: no files given")
    return paths
