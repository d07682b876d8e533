"""A finished training segment: its manifest, whether it is done under the parameters asked
now, its step log's check, and the copies that let a retried group job restore it.

**The manifest** ``segments/seg{end}.json`` (:func:`write_manifest`) is written last, once
every checkpoint of the segment and its step log are on disk; it records

- ``digest`` (:func:`villani.plan.digest.run_digest`) and ``train_params`` — the values of
  every key training reads (:func:`villani.plan.digest.trained_params`);
- ``checkpoints``: per checkpoint the sha256 of its weights and of its ``checkpoint.json``
  (:func:`villani.training.checkpoint.manifest_entry`);
- ``start_checkpoint``: the weights' sha256 of the checkpoint the segment continued from
  (null for the first), so a segment retrained under it is seen;
- ``log_sha256``: the sha256 of its published step log.

**Done** (:func:`segment_status`): a segment is done only when its manifest reads, its
digest is the one the parameters asked now give the run, each checkpoint's
``checkpoint.json`` still has the recorded sha256, its start checkpoint is the one it
continued from, its step log is the one it wrote, every file of its checkpoints that is
there has the sha256 its ``checkpoint.json`` records (a truncated ``model.safetensors`` is
not intact), and the segment end's weights and state are there (the next segment resumes
from them; elsewhere ``villani prune`` may have deleted them). Anything else — a missing,
truncated or edited manifest or checkpoint file, a parameter edited since (``train.lr``
under ``dvc repro``) — is "not done", with the reason, and ``villani train --all`` retrains
the segment: files left from
an earlier training (a persisted, pulled or copied output) never stand for a segment
trained under the parameters asked now. (A manifest written before the start and log
links were recorded is checked on the rest.)

**The step log** is checked before the manifest is written (:func:`check_step_log`:
steps start+1 … end once each, in order, finite values): a log another process wrote into
is never published as the segment's.

**Finished copies** (:func:`keep_finished`, :func:`restore_finished`): the manifest and
step log are also kept as hard links in ``work/done/``, named by the digest. Snakemake reruns
a group job whole after a failure (``profiles/slurm`` groups a run's segments), deleting
every member's outputs first; the segment is then restored instead of retrained.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Mapping

import pandas as pd

from villani.io import atomic, records, tables
from villani.plan import layout
from villani.plan.digest import params_difference, run_digest, trained_params
from villani.plan.schedule import checkpoints_in_segment, segment_start
from villani.training.checkpoint import FILES, OPTIONAL_FILES, manifest_entry, read_meta

__all__ = ["write_manifest", "segment_status", "check_step_log", "keep_finished", "restore_finished"]

_OUTPUTS = (layout.SEGMENT, layout.SEGMENT_LOG)
_PRUNED = ("weights_sha256", "state_sha256")  # what `villani prune` deletes of a measured checkpoint


def _start_weights(root, ident: Mapping, start: int) -> str | None:
    """The weights' sha256 its checkpoint.json records for checkpoint ``start`` (None for 0,
    or when that file cannot be read)."""
    if start == 0:
        return None
    try:
        meta = json.loads(layout.fmt(layout.CKPT_META, root, step=start, **ident).read_text())
        return meta.get("weights_sha256") if isinstance(meta, dict) else None
    except (OSError, ValueError):
        return None


def write_manifest(params: Mapping, root, ident: Mapping, end: int, resumed_from: int | None) -> dict:
    """Write the segment's manifest (module doc); return it."""
    t = params["train"]
    start = segment_start(t, end)
    manifest = {
        **ident, "lam": float(ident["lam"]), "start": start, "end": end,
        "digest": run_digest(params, ident["variant"], ident["lam"], ident["seed"]),
        "train_params": trained_params(params, ident["variant"]),
        "resumed_from_work_step": resumed_from,
        "start_checkpoint": None if start == 0 else {"step": start,
                                                     "weights_sha256": _start_weights(root, ident, start)},
        "log_sha256": atomic.sha256_file(layout.fmt(layout.SEGMENT_LOG, root, step=end, **ident)),
        "checkpoints": [manifest_entry(root, step=s, **ident) for s in checkpoints_in_segment(t, end)],
    }
    return records.write_record(layout.fmt(layout.SEGMENT, root, step=end, **ident), manifest, "segment")


def _manifest(path: Path) -> dict:
    return records.check("segment", atomic.read_json(path, "segment manifest"), path)


def segment_status(params: Mapping, root, ident: Mapping, end: int) -> str | None:
    """None when the segment ending at ``end`` is done under ``params`` (module doc), else
    why it is not (one line)."""
    t = params["train"]
    path = layout.fmt(layout.SEGMENT, root, step=end, **ident)
    if not path.exists():
        return f"{path}: not trained yet"
    try:
        m = _manifest(path)
    except ValueError as e:
        return str(e)
    if m.get("digest") != run_digest(params, ident["variant"], ident["lam"], ident["seed"]):
        diff = params_difference(m.get("train_params") or {}, trained_params(params, ident["variant"]))
        return f"{path}: trained under other parameters ({diff or 'digest ' + str(m.get('digest'))})"
    entries = {e.get("step"): e for e in m.get("checkpoints") or [] if isinstance(e, dict)}
    for step in checkpoints_in_segment(t, end):
        meta = layout.fmt(layout.CKPT_META, root, step=step, **ident)
        if step not in entries or not meta.exists() or atomic.sha256_file(meta) != entries[step].get("meta_sha256"):
            return f"{meta}: missing, or not the checkpoint.json {path.name} recorded"
    # a manifest of an older villani lacks the start and log links: the rest is checked
    start = segment_start(t, end)
    if start and "start_checkpoint" in m and (m["start_checkpoint"] or {}).get("weights_sha256") != _start_weights(
            root, ident, start):
        return f"{path}: its start checkpoint (step {start}) was retrained since"
    log = layout.fmt(layout.SEGMENT_LOG, root, step=end, **ident)
    if not log.exists() or ("log_sha256" in m and atomic.sha256_file(log) != m["log_sha256"]):
        return f"{log}: missing, or not the step log {path.name} recorded"
    for step in checkpoints_in_segment(t, end):
        why = _damaged_file(root, ident, step, resumes=step == end)
        if why:
            return why
    return None


def _damaged_file(root, ident: Mapping, step: int, resumes: bool) -> str | None:
    """Why checkpoint ``step``'s files are not those its ``checkpoint.json`` (already checked
    against the manifest) records, or None: a file there whose sha256 differs (a truncated
    or edited ``model.safetensors``), or one missing — the weights and state only where the
    next segment ``resumes`` from them (elsewhere ``villani prune`` deletes them on purpose)."""
    meta = json.loads(layout.fmt(layout.CKPT_META, root, step=step, **ident).read_text())  # as recorded
    for key, pattern in FILES + OPTIONAL_FILES:
        file = layout.fmt(pattern, root, step=step, **ident)
        if meta.get(key) is None:
            continue
        if not file.exists():
            if resumes or key not in _PRUNED:
                return f"{file}: missing" + (" (the next segment resumes from it)" if resumes else "")
        elif atomic.sha256_file(file) != meta[key]:
            return f"{file}: sha256 does not match its checkpoint.json (corrupt or modified)"
    return None


def check_step_log(path: Path, start: int, end: int) -> None:
    """The step log of a segment (start, end]: one-line ValueError naming the file unless it
    holds steps start+1 … end once each, in order, with finite values (:func:`villani.io.tables.step_log`)."""
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: step log is corrupt ({' '.join(str(e).split())[:200]})") from None
    tables.step_log(df, path, start=start, end=end)


# --------------------------------------------------------------------------- finished copies
def _finished_copies(root, ident, end: int, digest: str) -> list[tuple[Path, Path]]:
    """(output, its copy) for the segment's manifest and step log; the copies are hard links
    in ``work/done/``, named by the parameters' digest."""
    done = layout.fmt(layout.WORK_DIR, root, **ident) / "done"
    outs = [layout.fmt(f, root, step=end, **ident) for f in _OUTPUTS]
    return [(out, done / f"{digest[:16]}-{out.name}") for out in outs]


def _link(src: Path, dest: Path) -> None:
    """``dest`` becomes ``src``'s content atomically (a hard link, or a copy across file systems)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.link.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dest)


def keep_finished(root, ident, end: int, digest: str) -> None:
    """Keep the finished segment's outputs under ``work/done/`` too (module doc)."""
    for out, copy in _finished_copies(root, ident, end, digest):
        _link(out, copy)


def restore_finished(root, ident, end: int, digest: str, steps: list[int]) -> dict | None:
    """The manifest of this segment trained earlier with the same parameters, its outputs
    restored, if its copies exist, every checkpoint of ``steps`` (its start and its own)
    verifies — its own against the copied manifest — and the step log is the one it
    recorded; else None (the segment then trains, and a damaged checkpoint is refused there
    in one line)."""
    pairs = _finished_copies(root, ident, end, digest)
    if not all(copy.exists() for _, copy in pairs):
        return None
    try:
        manifest = _manifest(pairs[0][1])
        entries = {c.get("step"): c for c in manifest["checkpoints"]}
        shas = {s: read_meta(root, step=s, verify=True, entry=entries.get(s), **ident)["weights_sha256"]
                for s in steps}
    except (ValueError, OSError, KeyError, TypeError, AttributeError):
        return None
    if (manifest.get("digest") != digest or atomic.sha256_file(pairs[1][1]) != manifest.get("log_sha256")
            or any(c.get("weights_sha256") != shas.get(c.get("step")) for c in manifest["checkpoints"])):
        return None
    for out, copy in reversed(pairs):  # the manifest last: it says the segment is done
        _link(copy, out)
    return manifest
