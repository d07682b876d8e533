"""The Hugging Face cache: download from the hub once, read offline ever after.

Everything villani takes from the Hugging Face hub — a dataset's data files, a pretrained
tokenizer, a model's config and weights — is read from the Hugging Face cache
(``$HF_HUB_CACHE``, by default ``$HF_HOME/hub`` = ``~/.cache/huggingface/hub``).
``villani fetch`` fills it on a machine with internet; every later stage reads the same
files and, with ``HF_HUB_OFFLINE=1``, makes no network request at all.

The cache holds one folder per commit of a repository (``<repo>/snapshots/<commit>/``)
and, for each branch or tag downloaded, the commit it pointed to
(``<repo>/refs/<branch>``). A revision is therefore resolved to the same commit, and
read from the same files, offline as online; a commit hash never changes its files.

- ``is_hub_name(name)``: ``name`` or ``owner/name`` that is not an existing local path.
- ``dataset_snapshot(repo_id, revision, allow_patterns)``: the local folder of a dataset
  repository at ``revision`` holding (at least) the files matching ``allow_patterns``;
  downloads what is missing when the hub is reachable. Every failure is a one-line
  ``ValueError`` naming ``data.source`` or ``data.revision``.
- ``cached_commit(repo_id, filenames)``: the commit and folder a top-level file of a
  model repository was read from (for the fetch report), or ``None``.
- ``offline()``, ``cache_dir()``, ``not_cached(...)``, ``model_error(...)``: the state
  and the errors telling the user to run ``villani fetch``.
"""

from __future__ import annotations

import re
from pathlib import Path

_HUB_NAME = re.compile(r"^[\w.-]{1,96}(/[\w.-]{1,96})?$")


def is_hub_name(name: str) -> bool:
    """Whether ``name`` reads as a hub repository id (``name`` or ``owner/name``), not a local path."""
    return bool(_HUB_NAME.match(name)) and not Path(name).exists() and ".." not in name


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) as huggingface_hub reads it."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def cache_dir() -> str:
    """The hub cache folder in use (``HF_HUB_CACHE``, default ``$HF_HOME/hub``)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def not_cached(key: str, what: str, revision: str | None = None) -> ValueError:
    """The one-line error for a hub file that is neither cached nor downloadable here."""
    at = f" at revision {revision!r}" if revision else ""
    why = "HF_HUB_OFFLINE=1" if offline() else "the hub cannot be reached"
    return ValueError(
        f"{key}: {what}{at} is not in the Hugging Face cache {cache_dir()} and {why}: run "
        "`villani fetch` with the same parameters and HF_HOME on a machine with internet "
        "(docs/slurm.md, 'Fetch once on the login node')"
    )


def model_error(name: str, e: BaseException) -> ValueError:
    """The one-line error for ``model.name`` that transformers could not load (``e``):
    :func:`not_cached` when it is a hub name and the hub is off or unreachable."""
    first = _first_line(e)
    if is_hub_name(name) and (offline() or "connect" in first.lower()):
        return not_cached("model.name", f"model {name!r}")
    return ValueError(f"model.name: cannot load {name!r}: {first}")


def dataset_snapshot(repo_id: str, revision: str | None, allow_patterns: list[str] | None) -> Path:
    """The cached folder ``snapshots/<commit>`` of dataset ``repo_id`` at ``revision`` (default: main).

    Online, the revision is resolved on the hub and the files matching ``allow_patterns``
    (every file when ``None``; fnmatch patterns, ``*`` also matching ``/``) that are not
    cached yet are downloaded. Offline (``HF_HUB_OFFLINE=1``, or the hub unreachable) the
    cached ``refs/<revision>`` gives the commit and the cached folder is returned as it
    is. The folder may not exist when no file matched.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    what = f"dataset {repo_id!r}"
    try:
        path = snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=allow_patterns)
    except LocalEntryNotFoundError:
        raise not_cached("data.source", what, revision) from None
    except GatedRepoError:
        raise ValueError(
            f"data.source: {what} is gated on the hub: accept its terms on huggingface.co and log in "
            "(`hf auth login`) before `villani fetch`"
        ) from None
    except RevisionNotFoundError:
        raise ValueError(f"data.revision: {revision!r} is not a branch, tag or commit of {what} on the hub") from None
    except RepositoryNotFoundError:
        raise ValueError(
            f"data.source: no {what} on the hub and no local directory of that name "
            "(a private dataset needs `hf auth login`)"
        ) from None
    except HFValidationError as e:
        raise ValueError(f"data.source: {repo_id!r} is not a valid hub dataset name: {_first_line(e)}") from None
    except OSError as e:  # any other HTTP error from the hub
        raise ValueError(f"data.source: cannot download {what}: {_first_line(e)}") from e
    return Path(path)


def cached_commit(repo_id: str, filenames: tuple[str, ...], revision: str | None = None) -> tuple[str, Path] | None:
    """(commit, snapshot folder) of the first of ``filenames`` found in the cache for
    ``revision`` (default: the default branch) of model repository ``repo_id``; ``None`` if
    none is cached."""
    from huggingface_hub import try_to_load_from_cache

    for filename in filenames:
        path = try_to_load_from_cache(repo_id, filename, revision=revision)
        if isinstance(path, str):
            folder = Path(path).parent
            return folder.name, folder
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
