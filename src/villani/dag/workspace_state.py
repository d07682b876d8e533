"""What the two engines have to agree about: ``dvc.lock`` read and checked, and the state of
the workspace it vouches for, as one digest.

**The lock.** :func:`read_lock` parses ``dvc.lock`` as DVC does (YAML, ``schema: '2.0'``,
a mapping of stages with their ``outs``). A file DVC cannot read — truncated, garbage
appended, left with merge-conflict markers — is :class:`LockInvalid`, a one-line error that
names the file and the command that repairs it (:func:`repair_command`): never "nothing to
be done" while ``dvc status`` says the lock is invalid.

**The state.** :func:`state` is the sha256 of ``dvc.lock``'s bytes and of every file under
every output it lists — path, size, modification time (ns) and inode, or "missing". Every
operation that changes what DVC vouches for or what is on disk changes it: ``dvc pull``
(whole or partial), ``dvc checkout`` (``--force`` too), ``dvc exp apply``, ``dvc repro``,
``git checkout`` of another version's ``dvc.lock``, a hand edit. Nothing else does: editing
``params.yaml`` or code leaves it, so a dry run after an edit costs no DVC call.

**What both engines last agreed on.** :func:`remember` writes the state to
``.snakemake/villani/workspace.sha256`` when DVC vouches for the workspace and Snakemake's
metadata describes it: after a run of ``params.yaml`` recorded its outputs in ``dvc.lock``
(:func:`villani.dag.dvc_sync.record`), and after what DVC made was taken into Snakemake's
metadata (:func:`villani.dag.dvc_sync.sync`). :func:`seen` says whether the workspace is
still that one. The file is a cache of a comparison, not a verdict: it holds the digest of
the whole state, so no pull, checkout or edit can leave it saying "seen" for a workspace
the engines have not agreed on.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

from villani.io import atomic

__all__ = ["LOCK", "SEEN", "LockInvalid", "lock_invalid", "read_lock", "repair_command", "state", "remember", "seen"]

LOCK = "dvc.lock"
SEEN = Path(".snakemake") / "villani" / "workspace.sha256"  # the state both engines last agreed on


class LockInvalid(ValueError):
    """``dvc.lock`` is no lock file DVC can read; ``str(err)`` is one line with the repair."""


def repair_command(workdir: str | Path = ".") -> str:
    """The command that gives a readable ``dvc.lock`` back: the committed one when git has
    one (``git checkout HEAD -- dvc.lock``, also in the middle of a merge), else removing it
    (a run of ``params.yaml`` writes it again from the workspace, as the first run does)."""
    try:
        tracked = subprocess.run(["git", "cat-file", "-e", f"HEAD:{LOCK}"], cwd=workdir,
                                 capture_output=True).returncode == 0
    except OSError:
        tracked = False
    return f"git checkout HEAD -- {LOCK}" if tracked else f"rm {LOCK}"


def lock_invalid(workdir: Path, what: str) -> LockInvalid:
    """The error for a ``dvc.lock`` that is ``what``: the file, the fault, the repair."""
    cmd = repair_command(workdir)
    then = ("then `make run` and `dvc status` agree again" if cmd.startswith("git")
            else "and `make run` writes it again from the workspace")
    return LockInvalid(f"{LOCK}: {what}; neither DVC nor the workflow can use it: restore it with `{cmd}`, {then}")


def read_lock(workdir: str | Path = ".") -> dict[str, Any] | None:
    """``dvc.lock`` parsed, None when there is none; :class:`LockInvalid` when DVC could not
    read it (the checks DVC's schema makes first: YAML, ``schema: '2.0'``, stages with
    lists of outputs that have a path)."""
    import yaml

    workdir = Path(workdir)
    path = workdir / LOCK
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        conflict = b"\n<<<<<<< " in b"\n" + text
        raise lock_invalid(workdir, "git merge-conflict markers" if conflict
                       else f"not valid YAML{where} (truncated or damaged)") from None
    if not isinstance(doc, dict) or str(doc.get("schema")) != "2.0" or not isinstance(doc.get("stages"), dict):
        raise lock_invalid(workdir, "not a lock file of schema 2.0 with a mapping of stages")
    for name, stage in doc["stages"].items():
        outs = stage.get("outs", []) if isinstance(stage, dict) else None
        if not isinstance(outs, list) or not all(isinstance(o, dict) and isinstance(o.get("path"), str) for o in outs):
            raise lock_invalid(workdir, f"stage {name!r} has no list of outputs with paths")
    return doc


def _files(path: Path):
    """``(path, stat)`` of the file, or of every file below the folder (None when missing)."""
    if path.is_dir():
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for f in sorted(filenames):
                p = Path(dirpath, f)
                try:
                    yield p, p.lstat()
                except FileNotFoundError:
                    continue
    else:
        try:
            yield path, path.lstat()
        except FileNotFoundError:
            yield path, None


def state(workdir: str | Path = ".", lock: dict[str, Any] | None = None) -> str | None:
    """The sha256 of ``dvc.lock`` and of every file under its outputs (path, size, mtime in
    ns, inode; "missing" for an output that is not there); None without a ``dvc.lock``.
    ``lock``: the parsed file, when the caller has it (:func:`read_lock`)."""
    workdir = Path(workdir)
    lock = read_lock(workdir) if lock is None else lock
    if lock is None:
        return None
    h = hashlib.sha256((workdir / LOCK).read_bytes())
    outs = sorted({o["path"] for s in lock["stages"].values() for o in s.get("outs", [])})
    for out in outs:
        for p, st in _files(workdir / out):
            rel = p.relative_to(workdir).as_posix()
            entry = "missing" if st is None else f"{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}"
            h.update(f"\0{rel}\0{entry}".encode())
    return h.hexdigest()


def remember(workdir: str | Path = ".", digest: str | None = None) -> None:
    """Record ``digest`` (default: the workspace's :func:`state` now) as the state both engines
    agree on; nothing without a ``dvc.lock``."""
    digest = digest or state(workdir)
    if digest:
        atomic.write_text(Path(workdir) / SEEN, digest + "\n")


def seen(digest: str, workdir: str | Path = ".") -> bool:
    """Whether ``digest`` is the state :func:`remember` last recorded."""
    path = Path(workdir) / SEEN
    return path.is_file() and path.read_text().strip() == digest
