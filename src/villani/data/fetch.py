"""Fetch once: put everything the workflow reads from the Hugging Face hub into the cache.

``fetch(params)`` makes the stages that follow independent of the network. It reads,
through the very calls those stages make, and so downloads into the Hugging Face cache
(``$HF_HOME``, see ``villani.data.hub``) when the hub is reachable:

- the corpus: ``villani.data.sources.open_source(data)`` — a hub dataset's card and the
  data files of its config at ``data.revision``, loaded once with ``datasets`` (which
  also fills its Arrow cache ``$HF_HOME/datasets``) and checked (no loading script, a
  train split, the text column, no empty split);
- the tokenizer, for ``data.tokenizer.kind: pretrained``:
  ``villani.data.tokenizer.load_pretrained(name)``;
- the model, when ``model.name`` is set: its config (``AutoConfig``), and with
  ``model.init: pretrained`` its weights (``AutoModelForCausalLM.from_pretrained``).

With everything cached it runs offline (``HF_HUB_OFFLINE=1``) and reports the same
commits; a hub name neither cached nor reachable is the one-line error of
``hub.not_cached``. Local sources and local model/tokenizer paths are reported as
``local`` and need nothing.

It returns the fetch record, one entry per item (``None`` when the parameters do not use
it): ``corpus`` {``source``, ``revision``, ``commit`` (the hub commit the revision
resolved to, null for a local source), ``where`` (``hub``/``local``), ``location``,
``rows`` per split the source has}, ``tokenizer`` and ``model`` {``name``, ``commit``,
``where``, ``location``} (``model`` also ``init``). ``write_record`` stores it without
the machine-specific ``location`` paths, so the same parameters and hub state give the
same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from villani.data import hub

TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "config.json")
MODEL_FILES = ("config.json",)


def fetch(params: Mapping[str, Any]) -> dict[str, Any]:
    """Download (or find in the cache) the corpus, tokenizer and model the parameters name."""
    return {
        "corpus": fetch_corpus(params["data"]),
        "tokenizer": fetch_tokenizer(params["data"]),
        "model": fetch_model(params.get("model") or {}),
    }


def fetch_corpus(data_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Open (and so download and check) ``data.source`` at ``data.revision``."""
    from villani.data.sources import open_source

    source = open_source(dict(data_cfg))
    return {
        "source": source.spec,
        "revision": data_cfg.get("revision"),
        "commit": source.commit,
        "where": "hub" if source.commit else "local",
        "location": source.location,
        "rows": {split: len(docs) for split, docs in source.documents.items()},
    }


def fetch_tokenizer(data_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """Load the pretrained tokenizer as the data stage does; ``None`` for a trained BPE."""
    from villani.data.tokenizer import load_pretrained

    tok_cfg = data_cfg.get("tokenizer") or {}
    if tok_cfg.get("kind") != "pretrained":
        return None
    name = tok_cfg.get("name")
    load_pretrained(name, revision=tok_cfg.get("revision"))
    return {**_where(str(name), TOKENIZER_FILES, tok_cfg.get("revision")), "revision": tok_cfg.get("revision")}


def fetch_model(model_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """The config of ``model.name`` and, for ``init: pretrained``, its weights; ``None`` without a name."""
    name = model_cfg.get("name")
    if not name:
        return None
    from transformers import AutoConfig, AutoModelForCausalLM

    init, revision = model_cfg.get("init", "scratch"), model_cfg.get("revision")
    try:
        AutoConfig.from_pretrained(name, revision=revision, trust_remote_code=False)
        if init == "pretrained":
            AutoModelForCausalLM.from_pretrained(name, revision=revision, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise hub.model_error(name, e) from None
    return {"init": init, **_where(str(name), MODEL_FILES, revision), "revision": revision}


def _where(name: str, files: tuple[str, ...], revision: str | None = None) -> dict[str, Any]:
    """``name``'s commit at ``revision`` and its folder in the hub cache, or ``local`` for a
    local path."""
    if Path(name).exists():
        return {"name": name, "commit": None, "where": "local", "location": str(Path(name).resolve())}
    found = hub.cached_commit(name, files, revision)
    commit, folder = found if found else (None, None)
    return {"name": name, "commit": commit, "where": "hub", "location": str(folder) if folder else None}


def write_record(record: Mapping[str, Any], path: str | Path) -> None:
    """Write the fetch record as JSON, without the machine-specific ``location`` paths,
    checked against its schema (``villani/schemas/fetch.schema.yaml``) first."""
    from villani.io.records import write_record as write_checked

    write_checked(path, {item: None if entry is None else {k: v for k, v in entry.items() if k != "location"}
                         for item, entry in record.items()}, "fetch")


def describe(record: Mapping[str, Any]) -> list[str]:
    """Human-readable lines: what was fetched, where it lies and the commits resolved."""
    lines = [f"Hugging Face cache: {hub.cache_dir()}" + (" (HF_HUB_OFFLINE=1: cache only)" if hub.offline() else "")]
    corpus = record["corpus"]
    rev = f" revision {corpus['revision']}" if corpus["revision"] else ""
    rows = ", ".join(f"{s} {n} rows" for s, n in corpus["rows"].items())
    lines.append(f"corpus    {corpus['source']}{rev}: {_state(corpus)}; {rows}")
    for item in ("tokenizer", "model"):
        entry = record[item]
        if entry is None:
            lines.append(f"{item:<9} not needed")
        else:
            weights = " (config and weights)" if entry.get("init") == "pretrained" else \
                " (config)" if item == "model" else ""
            lines.append(f"{item:<9} {entry['name']}{weights}: {_state(entry)}")
    return lines


def _state(entry: Mapping[str, Any]) -> str:
    if entry["where"] == "local":
        return f"local {entry['location']}"
    return f"commit {entry['commit']} in {entry['location']}"
