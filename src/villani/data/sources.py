"""Raw text per split, read from the configured source.

``open_source(data_cfg)`` opens ``data.source`` and checks it (a ``Source``: the raw
documents of the splits the source has, and where they were read); ``read_splits``
turns that into ``{split: SplitText}`` for the three splits ``train``, ``validation``
and ``test``. A split is a list of *documents* (strings); documents that are empty or
whitespace-only are dropped (WikiText's blank rows).

Sources (``data.source``):

- ``builtin:pydoc`` — the text of ``pydoc_data.topics.topics`` (CPython's own
  documentation topics, shipped with every interpreter): one document per topic, in
  sorted key order. It has no validation/test split.
- ``hf:<dataset>[:<config>]`` — a data-only dataset (Parquet, JSON, CSV, text, … files;
  no loading script) read with ``datasets.load_dataset(<folder>, <config>)``; the
  documents are the rows of ``data.text_column`` of the splits ``train``,
  ``validation`` (or ``valid``/``dev``/``val``) and ``test``. ``<dataset>`` is either
  a local directory of data files (``train.parquet``, ``validation.jsonl``, … — the
  split is taken from the file name — or a dataset card whose ``configs`` name them; a
  ``<dataset>`` that exists as a local path is never split at ``:``), or a hub dataset
  ``<name>`` / ``<owner>/<name>`` at ``data.revision`` (a branch, tag or commit; default
  ``main``). A hub dataset is read from its snapshot in the Hugging Face cache
  (``villani.data.hub``): downloaded there when missing and the hub is reachable, read
  from there with ``HF_HUB_OFFLINE=1`` — so the hub and a local directory go through the
  very same ``load_dataset`` of a local folder. Only the card, then the data files of
  ``<config>`` (and of the card's first config, from which ``datasets`` infers the
  format) are downloaded. Examples: PTB ``hf:ptb-text-only/ptb_text_only`` at revision
  ``refs/convert/parquet`` (the hub's Parquet conversion of the script dataset
  ``ptb_text_only``; column ``sentence``), WikiText-103
  ``hf:Salesforce/wikitext:wikitext-103-raw-v1`` (column ``text``).
- ``hf-disk:<dir>`` — ``datasets.load_from_disk(<dir>)`` of a ``DatasetDict`` (its
  splits) or a single ``Dataset`` (taken as train) written with ``save_to_disk``.
- ``files`` (or ``files:``) — local UTF-8 text files per split from ``data.files``
  (``{train: [paths], validation: [...], test: [...]}``, a split may be one path or a
  list; glob patterns are expanded in sorted order); each file is one document.
  ``files:<path or glob>`` is ``files`` with ``data.files: {train: <path or glob>}`` (as
  ``villani diagnose --data`` takes it).
  Relative paths are relative to the current directory (the workflow's root).

A one-line ``ValueError`` naming the key, what is wrong and the fix, for: a dataset
loading script (``datasets`` ≥ 4 runs none: a folder holding ``<name>.py``; the error
names the data-only source to use instead), a hub dataset neither cached nor reachable
(run ``villani fetch`` where the hub is reachable), an unknown config, revision or
dataset, no train split, no ``data.text_column`` or one that is not text, a split
without any non-blank text, and ``data.revision`` with a source that is not on the hub.

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

from villani.data import hub

SPLITS = ("train", "validation", "test")
DEFAULT_SPLIT_FRACTION = 0.05
README = "README.md"
# data-only copies of script datasets (the fix a script-dataset error names)
_DATA_ONLY = {
    "ptb_text_only": "source hf:ptb-text-only/ptb_text_only with data.revision: refs/convert/parquet "
    "(the hub's Parquet conversion; configs/ptb.yaml), or Mikolov's ptb.{train,valid,test}.txt through source files",
}
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


@dataclass
class Source:
    """An opened ``data.source``: the raw documents of the splits it has, and where they came from.

    ``documents[split]`` is a list of strings or a lazy ``datasets`` column (rows read on
    iteration); ``location`` is the local folder or files read (a hub dataset's cached
    snapshot folder), ``commit`` the hub commit ``data.revision`` resolved to (``None`` for
    a local source).
    """

    spec: str
    location: str
    commit: str | None
    documents: dict[str, Any]


def open_source(data_cfg: dict[str, Any]) -> Source:
    """Open the configured source — downloading a hub dataset into the Hugging Face cache
    when it is not there yet — and check it: no loading script, a train split, the text
    column, no empty split. Every problem is a one-line ``ValueError``."""
    spec = str(data_cfg.get("source", "builtin:pydoc"))
    revision = data_cfg.get("revision")
    column = str(data_cfg.get("text_column") or "text")
    if revision is not None and not spec.startswith("hf:"):
        raise ValueError(f"data.revision: {revision!r} is only for hub datasets (source hf:<dataset>), "
                         f"not {spec!r}; set data.revision: null")
    if spec == "builtin:pydoc":
        source = Source(spec, "builtin", None, {"train": _pydoc_documents()})
    elif spec.startswith("hf:"):
        source = _open_hf(spec, column, None if revision is None else str(revision))
    elif spec.startswith("hf-disk:"):
        source = _open_hf_disk(spec, column)
    elif spec in ("files", "files:"):
        source = _open_files(data_cfg.get("files") or {})
    elif spec.startswith("files:"):
        if data_cfg.get("files"):
            raise ValueError(f"data.files: set with data.source {spec!r}, which names the files itself; use "
                             "data.source: files with data.files, or files:<glob> alone")
        source = _open_files({"train": spec[len("files:"):]})
    else:
        raise ValueError(
            f"data.source: unknown source {spec!r} (expected builtin:pydoc, hf:<dataset>[:<config>], hf-disk:<dir> or files)"
        )
    for split, docs in source.documents.items():
        if not any(isinstance(d, str) and d.strip() for d in docs):
            raise ValueError(
                f"data.source: {spec} split {split!r} has no text (no row or document that is not blank); "
                "give it text, or leave the split out so that it is carved from train"
            )
    return source


def read_splits(data_cfg: dict[str, Any], source: Source | None = None) -> dict[str, SplitText]:
    """The documents of train, validation and test of ``source`` (default: ``open_source(data_cfg)``).

    Blank documents are dropped; a split the source lacks is carved from the end of train
    (``data.split_fractions``).
    """
    source = source or open_source(data_cfg)
    splits = {name: SplitText(_clean(docs)) for name, docs in source.documents.items()}
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


def _open_hf(spec: str, column: str, revision: str | None) -> Source:
    """``hf:<dataset>[:<config>]``: a local directory, or a hub dataset read from its cached snapshot."""
    name, config = _name_and_config(spec[3:])
    if not name:
        raise ValueError("data.source: empty dataset name after 'hf:'")
    folder = Path(name)
    if folder.is_dir():
        if revision is not None:
            raise ValueError(f"data.revision: {revision!r} given, but {spec} is a local directory (revisions are "
                             "for hub datasets); set data.revision: null")
        _refuse_script(folder, folder.resolve().name + ".py", spec, on_hub=False)
        _check_config(_card_configs(folder / README, spec), config, spec)
        commit = None
    elif folder.exists():
        raise ValueError(f"data.source: {spec}: {name} is a file; hf: takes a dataset directory or hub name "
                         "(local text files: source files)")
    elif hub.is_hub_name(name):
        folder = _hub_folder(name, config, revision, spec)
        commit = folder.name
    else:
        raise ValueError(f"data.source: {spec}: {name} is neither a local directory nor a hub dataset name "
                         "(<name> or <owner>/<name>)")
    loaded = _load_dataset(folder, config, spec)
    return Source(spec, str(folder), commit, _text_columns(loaded, column, spec))


def _name_and_config(spec: str) -> tuple[str, str | None]:
    """``<dataset>[:<config>]``; a ``<dataset>`` that exists as a local path is never split."""
    if not Path(spec).exists() and ":" in spec:
        name, config = spec.split(":", 1)
        return name, config or None
    return spec, None


def _hub_folder(name: str, config: str | None, revision: str | None, spec: str) -> Path:
    """The cached snapshot of hub dataset ``name`` at ``revision`` with the files ``config`` needs.

    First only the dataset card and a loading script ``<name>.py`` are fetched (a script
    dataset is refused before any data is downloaded); then, at the commit that resolved
    to, the card's ``configs`` give the data files of ``config`` (plus those of the first
    config, from which ``datasets`` infers the file format); without ``configs`` in the
    card every file of the revision is fetched.
    """
    script = name.rsplit("/", 1)[-1] + ".py"
    # .gitattributes: nearly every repo has one, so this request rarely matches no file (a warning)
    head = hub.dataset_snapshot(name, revision, [README, script, ".gitattributes"])
    _refuse_script(head, script, spec, on_hub=True)
    patterns = _config_patterns(_card_configs(head / README, spec), config, spec)
    return hub.dataset_snapshot(name, head.name, patterns)


def _refuse_script(folder: Path, script: str, spec: str, *, on_hub: bool) -> None:
    """A dataset whose folder holds the loading script ``<name>.py`` is a one-line error."""
    if (folder / script).is_file():
        raise ValueError(_script_error(spec, script, on_hub=on_hub))


def _script_error(spec: str, script: str, *, on_hub: bool) -> str:
    import datasets

    known = _DATA_ONLY.get(Path(script).stem)
    if known:
        fix = f"use its data-only copy: {known}"
    elif on_hub:
        fix = ("use a data-only revision: data.revision: refs/convert/parquet (the hub's Parquet conversion, "
               "if it has one), or its data files through source files")
    else:
        fix = "convert it to data files (Parquet, JSON, CSV or text, one per split) or use source files"
    return (f"data.source: {spec} is a dataset loading script ({script}), which datasets "
            f"{datasets.__version__} no longer runs; {fix}")


def _card_configs(readme: Path, spec: str) -> dict[str, dict[str, Any]]:
    """The ``configs`` a dataset card (README.md front matter) declares; ``{}`` without any."""
    if not readme.is_file():
        return {}
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    try:
        return dict(MetadataConfigs.from_dataset_card_data(DatasetCard.load(readme).data))
    except Exception as e:  # YAML or schema errors of the card
        raise ValueError(f"data.source: {spec}: cannot read its dataset card {readme}: {_first_line(e)}") from e


def _check_config(configs: dict[str, Any], config: str | None, spec: str) -> None:
    if configs and config is not None and config not in configs:
        raise ValueError(f"data.source: {spec}: no config {config!r} (configs: {', '.join(configs)})")


def _config_patterns(configs: dict[str, dict[str, Any]], config: str | None, spec: str) -> list[str] | None:
    """File patterns (fnmatch) of ``config`` (every config when ``None``) and of the first of
    a dataset card's ``configs``, and the card; ``None`` (every file) when the card declares
    no data files."""
    _check_config(configs, config, spec)
    if not configs:
        return None
    chosen = [configs[config]] if config is not None else list(configs.values())
    patterns = [README]
    for meta in [next(iter(configs.values())), *chosen]:
        files = _data_file_patterns(meta)
        if files is None:
            return None
        patterns += [p for p in files if p not in patterns]
    return patterns


def _data_file_patterns(meta: dict[str, Any]) -> list[str] | None:
    """The ``data_files`` of one card config (relative to its ``data_dir``) as fnmatch patterns."""
    data_dir = meta.get("data_dir")
    prefix = f"{data_dir.strip('/')}/" if data_dir else ""
    data_files = meta.get("data_files")
    if data_files is None:
        return [prefix + "*"] if data_dir else None
    paths: list[str] = []
    for item in data_files if isinstance(data_files, list) else [data_files]:  # str | [str] | [{split, path}]
        path = item.get("path") if isinstance(item, dict) else item
        paths += [path] if isinstance(path, str) else list(path or [])
    # datasets' `**/` may match no folder at all; fnmatch's `*` already crosses `/`
    return [form for p in paths for form in dict.fromkeys((prefix + p, (prefix + p).replace("**/", "")))]


def _load_dataset(folder: Path, config: str | None, spec: str):
    """``datasets.load_dataset`` of a local folder; its failures as one-line ValueErrors."""
    import datasets

    try:
        return datasets.load_dataset(str(folder), config)
    except Exception as e:  # RuntimeError, ValueError, FileNotFoundError, datasets' own errors
        first = _first_line(e)
        cause = f" ({type(e.__cause__).__name__}: {_first_line(e.__cause__)})" if e.__cause__ else ""
        raise ValueError(f"data.source: {spec}: datasets cannot load it: {first}{cause}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _text_columns(loaded, column: str, what: str) -> dict[str, Any]:
    """The text column of the train/validation/test splits of a loaded Dataset(Dict)."""
    import datasets

    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    out: dict[str, Any] = {}
    for split in SPLITS:
        found = next((a for a in _SPLIT_ALIASES[split] if a in loaded), None)
        if found is None:
            continue
        ds = loaded[found]
        if column not in ds.column_names:
            raise ValueError(
                f"data.text_column: {what} split {found!r} has no column {column!r} "
                f"(columns: {', '.join(ds.column_names)}); set data.text_column to the column with the text"
            )
        feature = ds.features[column]
        if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
            raise ValueError(f"data.text_column: {what} column {column!r} holds {feature}, not text (a string column)")
        out[split] = ds[column]
    if "train" not in out:
        raise ValueError(
            f"data.source: {what} has no train split (splits: {', '.join(loaded)}); "
            "name the training data train (a data file train.*, or the split in the card's configs)"
        )
    return out


def _open_hf_disk(spec: str, column: str) -> Source:
    """``hf-disk:<dir>``: a Dataset or DatasetDict written with ``save_to_disk``."""
    import datasets

    path = spec[8:]
    if not path:
        raise ValueError("data.source: empty folder after 'hf-disk:'")
    try:
        loaded = datasets.load_from_disk(path)
    except FileNotFoundError as e:
        raise ValueError(f"data.source: {spec}: {e}") from None
    except Exception as e:  # a corrupt or unreadable save_to_disk folder
        raise ValueError(f"data.source: {spec}: datasets cannot load it: {type(e).__name__}: {_first_line(e)}") from e
    return Source(spec, str(Path(path)), None, _text_columns(loaded, column, spec))


def _open_files(files: dict[str, Any]) -> Source:
    """``files``: local UTF-8 text files per split, each file one document."""
    paths = {split: _expand(files[split], split) for split in SPLITS if files.get(split) is not None}
    if "train" not in paths:
        raise ValueError("data.files.train: source 'files' needs at least one train file")
    documents = {split: [_read_text_file(p, split) for p in ps] for split, ps in paths.items()}
    return Source("files", ", ".join(str(p) for ps in paths.values() for p in ps), None, documents)


def _read_text_file(path: Path, split: str) -> str:
    """One UTF-8 text file of ``split``; another encoding or a binary file is a one-line
    ValueError naming the file, the split and the first bad byte."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"data.files.{split}: {path} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                         f"{e.start}, line {line}; a Latin-1 or binary file? convert it with iconv -f latin1 -t utf-8)"
                         ) from None
    if "\x00" in text:
        raise ValueError(f"data.files.{split}: {path} holds NUL bytes (offset {text.index(chr(0))}): a binary file, "
                         "not text")
    return text


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
