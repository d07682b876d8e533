"""Checkpoints: a Hugging Face model folder + our metadata + resumable optimizer/RNG state.

A checkpoint at step t is the folder ``ckpt/step{t}/`` of its run holding

- ``config.json`` and ``model.safetensors`` — the model as ``save_pretrained`` lays it
  out (:func:`villani.model.causal_lm.save_weights`), so ``AutoModelForCausalLM.from_pretrained``
  and any evaluation tool open the folder directly;
- ``state.pt`` — optimizer, scheduler and RNG state (at segment ends by default,
  ``train.keep_state``), loaded with ``torch.load(weights_only=True)`` (no pickle code);
- ``tokenizer.json``, ``tokenizer_config.json`` — the dataset's tokenizer, so
  ``AutoTokenizer.from_pretrained`` opens the folder too; ``README.md`` — a model card
  (:mod:`villani.training.hf_folder`);
- ``checkpoint.json`` — step, tokens, losses, ‖θ‖², λ, seed, … and the sha256 of the
  other files (the card excepted).

**A checkpoint cannot lie about itself.** :func:`read_meta` checks the dataset, variant,
λ, seed and step recorded in ``checkpoint.json`` against the folder's path and the request
(a folder copied over another's is one line naming both values), and ``checkpoint.json``
itself against the sha256 the segment manifest ``segments/seg{end}.json`` recorded when the
training job wrote it (:func:`manifest_entry`; an edited train_loss is one line) — the
manifest is the training job's declared output, written by nothing else. The check fails
closed: a checkpoint that no readable manifest lists (a deleted, truncated or unfinished
manifest) is refused, never passed unchecked. A missing or pruned file is one line saying
how to get it back (:func:`retrain_hint`). :func:`verify_folder` makes the same checks on a
checkpoint folder given by its path (``villani diagnose --model``).

Every file is written atomically (temp + fsync + rename), ``checkpoint.json`` last: a
checkpoint is complete exactly when its JSON exists and the hashes match, so a
half-written checkpoint is never read. A run of the old flat layout (``ckpt/step{t}.
safetensors`` + ``.json`` + ``.state.pt``) is refused with one line naming the file;
:func:`convert_run` (``villani convert-checkpoints``) turns it into folders.
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path
from typing import Any, Mapping

import torch

from villani.io import atomic, records
from villani.io.results import read_checkpoint_meta
from villani.model.causal_lm import load_weights, model_for_run, pick_device, save_config, save_weights
from villani.plan import layout
from villani.plan.runs import Run
from villani.plan.writers import command
from villani.training.hf_folder import TOKENIZER_FILES, save_tokenizer, write_model_card

FILES = (("weights_sha256", layout.CKPT_WEIGHTS), ("config_sha256", layout.CKPT_CONFIG),
         ("state_sha256", layout.CKPT_STATE))
# the tokenizer files saved beside the weights, verified like the others (null: none saved)
OPTIONAL_FILES = tuple((key, layout.CKPT_DIR + "/" + name) for name, key in TOKENIZER_FILES.items())


def _paths(root, dataset, variant, lam, seed, step) -> dict[str, Path]:
    kw = dict(dataset=dataset, variant=variant, lam=lam, seed=seed, step=step)
    out = {key: layout.fmt(pattern, root, **kw) for key, pattern in FILES + OPTIONAL_FILES}
    out["meta"] = layout.fmt(layout.CKPT_META, root, **kw)
    return out


def _manifests(root, dataset, variant, lam, seed) -> tuple[list[tuple[Path, dict]], list[str]]:
    """The run's segment manifests: (path, manifest) of the readable ones, and a line for
    each that cannot be read (truncated, not JSON, or not a manifest its schema accepts —
    every checkpoint entry with its step and the sha256 of its weights and checkpoint.json)."""
    folder = layout.fmt(layout.SEGMENT, root, dataset=dataset, variant=variant, lam=lam, seed=seed, step=0).parent
    good, bad = [], []
    for path in sorted(folder.glob("seg*.json")) if folder.is_dir() else []:
        try:
            good.append((path, records.check("segment", atomic.read_json(path, "segment manifest"), path)))
        except ValueError as e:
            bad.append(str(e))
    return good, bad


def listing_manifest(root, dataset, variant, lam, seed, step) -> tuple[Path, dict] | None:
    """(path, entry) of the segment manifest of the run that lists checkpoint ``step``, or None."""
    for path, manifest in _manifests(root, dataset, variant, lam, seed)[0]:
        for entry in manifest["checkpoints"]:
            if entry["step"] == int(step):
                return path, entry
    return None


def retrain_hint(root, dataset, variant, lam, seed, step) -> str:
    """How to get checkpoint ``step`` of a run back: the command that retrains the segment
    that wrote it (:func:`villani.plan.writers.command`), or the run's every segment that is
    not intact where no manifest lists it."""
    ident = dict(dataset=dataset, variant=variant, lam=lam, seed=seed)
    found = listing_manifest(root, step=step, **ident)
    if found is None:
        return f"train it: `{command(layout.fmt(layout.CKPT_META, root, step=step, **ident))}` (or rerun the workflow)"
    return f"retrain its segment: `{command(found[0])}`"


def manifest_entry(root, dataset, variant, lam, seed, step) -> dict:
    """A checkpoint's line in its segment manifest: step and the sha256 of its weights and of
    its checkpoint.json (which :func:`read_meta` then checks)."""
    meta_path = layout.fmt(layout.CKPT_META, root, dataset=dataset, variant=variant, lam=lam, seed=seed, step=step)
    return {"step": int(step), "weights_sha256": read_checkpoint_meta(meta_path)["weights_sha256"],
            "meta_sha256": atomic.sha256_file(meta_path)}


def check_identity(meta: Mapping, meta_path, root, *, dataset, variant, lam, seed, step) -> None:
    """One-line ValueError unless ``meta`` records the dataset, variant, λ, seed and step of
    its path (and of the request; its schema requires all five)."""
    want = {"step": int(step), "lam": layout.format_lam(lam), "seed": int(seed), "variant": variant,
            "dataset": dataset}
    for key, expected in want.items():
        got = layout.format_lam(meta[key]) if key == "lam" else meta[key]
        if got != expected:
            raise ValueError(f"{meta_path}: {key} {got} in checkpoint.json, but {expected} from its path and the "
                             f"request: a checkpoint copied or moved from another {'step' if key == 'step' else 'run'}"
                             f"; {retrain_hint(root, dataset, variant, lam, seed, step)}")


def _check_manifest(meta_path: Path, root, ident: Mapping, step, entry: Mapping | None = None) -> None:
    """checkpoint.json must have the sha256 its segment manifest recorded (``entry``, or the
    line of the run's manifest that lists ``step``). A checkpoint no readable manifest lists
    is refused too — its segment did not finish, or its manifest was deleted or damaged —
    never passed unchecked."""
    where = None
    if entry is None:
        found = listing_manifest(root, step=step, **ident)
        if found is None:
            bad = _manifests(root, **ident)[1]
            why = (f"its segment manifest cannot be read ({bad[0]})" if bad else
                   "no segment manifest lists it (its segment did not finish, or its manifest was deleted)")
            raise ValueError(f"{meta_path}: cannot be checked: {why}; {retrain_hint(root, step=step, **ident)}")
        where, entry = found
    if atomic.sha256_file(meta_path) != entry["meta_sha256"]:
        raise ValueError(f"{meta_path}: sha256 does not match the one {where or 'its segment manifest'} recorded when "
                         f"training wrote it (edited or replaced checkpoint metadata); "
                         f"{retrain_hint(root, step=step, **ident)}")


def old_layout_file(root, dataset, variant, lam, seed, step) -> Path | None:
    """A file of checkpoint ``step`` in the old flat layout (``ckpt/step{t}.safetensors``,
    ``.json``, ``.state.pt``), or None."""
    kw = dict(dataset=dataset, variant=variant, lam=lam, seed=seed, step=step)
    return next((f for f in (layout.fmt(p, root, **kw) for p in layout.OLD_CKPT_FILES) if f.exists()), None)


def _refuse_old_layout(root, dataset, variant, lam, seed, step) -> None:
    old = old_layout_file(root, dataset, variant, lam, seed, step)
    if old is not None:
        raise ValueError(f"{old}: checkpoint in the old flat layout; checkpoints are now Hugging Face folders "
                         f"ckpt/step{{t}}/ — run `villani convert-checkpoints` once (or delete the run and retrain)")


def save_state_file(path: Path, state: Mapping[str, Any]) -> None:
    buf = io.BytesIO()
    torch.save(dict(state), buf)
    atomic.write_bytes(path, buf.getvalue())


def load_state_file(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"{path}: training state not found") from None
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: corrupt or truncated training state ({msg[:200]})") from None


def _bad_state(path, field: str, got: Any, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: {got} is invalid (expected {expected})")


def check_work_state(state: Any, path, model: Mapping[str, Any]) -> dict:
    """A training segment's work state: an object with ``optimizer`` and ``scheduler``
    state dicts, the RNG states as uint8 tensors, integer ``step``, ``tokens_seen``,
    ``log_bytes``, ``log_rows`` ≥ 0, number ``wall_clock_s`` ≥ 0, text ``digest`` and
    ``model``: a tensor of the shape and dtype of every entry of ``model`` (the segment's
    state dict). A one-line ValueError naming the file and the key otherwise."""
    if not isinstance(state, Mapping):
        raise _bad_state(path, "(top level)", f"a {type(state).__name__}", "an object")
    for key in ("optimizer", "scheduler", "model"):
        if not isinstance(state.get(key), Mapping):
            raise _bad_state(path, key, type(state.get(key)).__name__, "an object")
    for key in ("torch_rng", "noise_rng", "cuda_rng"):
        v = state.get(key)
        if not (isinstance(v, torch.Tensor) and v.dtype == torch.uint8):
            raise _bad_state(path, key, type(v).__name__, "a uint8 tensor (an RNG state)")
    opt = state["optimizer"]
    if not isinstance(opt.get("state"), Mapping) or not isinstance(opt.get("param_groups"), list):
        raise _bad_state(path, "optimizer", sorted(map(str, opt)), "an optimizer state dict (state, param_groups)")
    for key in ("step", "tokens_seen", "log_bytes", "log_rows"):
        v = state.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise _bad_state(path, key, json.dumps(v, default=str), "an integer ≥ 0")
    v = state.get("wall_clock_s")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == float("inf"):
        raise _bad_state(path, "wall_clock_s", json.dumps(v, default=str), "a number ≥ 0")
    if not isinstance(state.get("digest"), str):
        raise _bad_state(path, "digest", json.dumps(state.get("digest"), default=str), "text")
    weights = state["model"]
    if set(weights) != set(model):
        extra, lacking = sorted(set(weights) - set(model)), sorted(set(model) - set(weights))
        raise _bad_state(path, "model", (lacking or extra)[:3], "the tensors of the run's model"
                         + (f"; lacks {len(lacking)}" if lacking else "") + (f"; {len(extra)} unknown" if extra else ""))
    for name, ref in model.items():
        w = weights[name]
        if not isinstance(w, torch.Tensor) or tuple(w.shape) != tuple(ref.shape) or w.dtype != ref.dtype:
            got = f"{tuple(w.shape)} {w.dtype}" if isinstance(w, torch.Tensor) else type(w).__name__
            raise _bad_state(path, f"model.{name}", got, f"a tensor {tuple(ref.shape)} {ref.dtype}")
    return dict(state)


def save_checkpoint(root, dataset, variant, lam, seed, step, model, state: Mapping | None, meta: Mapping) -> dict:
    """Write weights, config, state (unless None) and, last, ``checkpoint.json`` with their
    sha256; return the JSON dict."""
    f = _paths(root, dataset, variant, lam, seed, step)
    save_weights(model, f["weights_sha256"])
    save_config(model.config, f["config_sha256"])
    tokenizer = save_tokenizer(root, dataset, f["meta"].parent)
    if state is not None:
        save_state_file(f["state_sha256"], state)
    else:
        f["state_sha256"].unlink(missing_ok=True)
    meta = dict(meta, step=int(step), written_at=time.time(), **tokenizer,
                **{key: atomic.sha256_file(f[key]) if key != "state_sha256" or state is not None else None
                   for key, _ in FILES})
    write_model_card(f["meta"].parent, meta, layout.fmt(layout.MEASURE_JSON, root, dataset=dataset, variant=variant,
                                                       lam=lam, seed=seed, step=step))
    return records.write_record(f["meta"], meta, "checkpoint")


def read_meta(root, dataset, variant, lam, seed, step, *, verify: bool = True, entry: Mapping | None = None) -> dict:
    """``checkpoint.json``; with ``verify`` it must match its segment manifest (``entry``: the
    manifest line to check it against, default the run's manifest that lists it) and the
    weights, config and state must match their sha256."""
    ident = dict(dataset=dataset, variant=variant, lam=lam, seed=seed)
    f = _paths(root, step=step, **ident)
    if not f["meta"].exists():
        _refuse_old_layout(root, step=step, **ident)
        raise ValueError(f"{f['meta']}: checkpoint not found; {retrain_hint(root, step=step, **ident)}")
    meta = read_checkpoint_meta(f["meta"])
    check_identity(meta, f["meta"], root, step=step, **ident)
    if verify:
        _check_manifest(f["meta"], root, ident, step, entry)
        for key, _ in FILES + OPTIONAL_FILES:
            if meta.get(key) is None and key != "weights_sha256":
                continue  # optimizer state kept only at segment ends (train.keep_state); a file not saved
            if not f[key].exists():
                raise ValueError(_missing(f[key], root, step, ident))
            if atomic.sha256_file(f[key]) != meta[key]:
                raise ValueError(f"{f[key]}: sha256 does not match {f['meta'].name} (corrupt or modified checkpoint); "
                                 f"{retrain_hint(root, step=step, **ident)}")
    return meta


_RUN_PARTS = re.compile(r"runs/(?P<dataset>[^/]+)/(?P<variant>[^/]+)/lam(?P<lam>[0-9.eE+-]+)/seed(?P<seed>\d+)/ckpt/"
                        r"step(?P<step>\d{7})\Z")


def verify_folder(folder: str | Path) -> dict | None:
    """The ``checkpoint.json`` of a checkpoint folder given by its path, with the checks
    :func:`read_meta` makes — every file it lists against its sha256, and where the folder
    lies in a run's layout (``…/runs/<dataset>/<variant>/lam<λ>/seed<s>/ckpt/step<t>``)
    the identity it records and its segment manifest; None for a folder without one (any
    Hugging Face folder). A failed check is a one-line ValueError naming the file."""
    folder = Path(folder)
    meta_path = folder / Path(layout.CKPT_META).name
    if not meta_path.is_file():
        return None
    found = _RUN_PARTS.search(folder.absolute().as_posix())
    if found is not None and not re.fullmatch(r"\d+(\.\d*)?([eE][+-]?\d+)?", found["lam"]):
        found = None
    if found is None:
        meta = read_checkpoint_meta(meta_path)
        names = {key: Path(pattern).name for key, pattern in FILES + OPTIONAL_FILES}
        for key, name in names.items():
            if meta.get(key) is None and key != "weights_sha256":
                continue
            if not (folder / name).is_file():
                raise ValueError(f"{folder / name}: missing although {meta_path.name} lists it (incomplete checkpoint)")
            if atomic.sha256_file(folder / name) != meta[key]:
                raise ValueError(f"{folder / name}: sha256 does not match {meta_path} (corrupt or modified checkpoint)")
        return meta
    root = folder.absolute().parents[6]
    ident = dict(dataset=found["dataset"], variant=found["variant"], lam=float(found["lam"]), seed=int(found["seed"]))
    return read_meta(root, step=int(found["step"]), **ident)


def _missing(path: Path, root, step, ident: Mapping) -> str:
    """The line for a file checkpoint.json lists that is gone: pruned, or lost."""
    measured = layout.fmt(layout.MEASURE_JSON, root, step=step, **ident).exists()
    if measured and path.name in (Path(layout.CKPT_WEIGHTS).name, Path(layout.CKPT_STATE).name):
        return (f"{path}: deleted by `villani prune` after step {step} was measured (it keeps checkpoint.json); "
                f"to use the weights again, {retrain_hint(root, step=step, **ident)}")
    return f"{path}: missing although checkpoint.json lists it (incomplete checkpoint); " \
           f"{retrain_hint(root, step=step, **ident)}"


def load_checkpoint(root, dataset, variant, lam, seed, step, model, *, with_state: bool = False):
    """Verify and load a checkpoint into ``model``; return (meta, state or None)."""
    f = _paths(root, dataset, variant, lam, seed, step)
    meta = read_meta(root, dataset, variant, lam, seed, step)
    load_weights(model, f["weights_sha256"])
    return meta, (load_state_file(f["state_sha256"]) if with_state else None)


def load_run_model(params: Mapping, root, run: Run, step: int, device: str | None = None
                   ) -> tuple[torch.nn.Module, dict]:
    """(model, checkpoint metadata): the model of ``run`` at checkpoint ``step`` — built for
    the run's dataset vocabulary, its files verified against their sha256 and loaded, in
    float32 and eval mode on ``device`` (default: cuda if available) — for every stage that
    evaluates a trained model (measure, rays, landscape). A checkpoint trained under other
    parameters is refused (:func:`villani.training.provenance.check_trained_under`)."""
    from villani.training.provenance import check_trained_under

    check_trained_under(params, run, read_meta(root, step=step, verify=False, **run.wildcards),
                        layout.fmt(layout.CKPT_META, root, step=step, **run.wildcards))
    model = model_for_run(params, root, run.seed)
    meta, _ = load_checkpoint(root, step=step, model=model, **run.wildcards)
    return model.float().to(pick_device(device)).eval(), meta


def convert_run(params: Mapping, root, run: Run) -> list[int]:
    """Rewrite the old flat checkpoints of ``run`` as folders; return the converted steps.

    Each old checkpoint is verified against its JSON's sha256, loaded into the params'
    model, written as a folder (weights renamed the Hugging Face way, config added, state
    moved) with its metadata kept, and its old files removed; the segment manifests are
    rewritten with the new weights' sha256. Checkpoints already converted are skipped."""
    from villani.plan.schedule import checkpoint_steps, segment_ends

    done = []
    for step in checkpoint_steps(params["train"]):
        kw = dict(run.wildcards, step=step)
        old_weights, old_meta, old_state = (layout.fmt(p, root, **kw) for p in layout.OLD_CKPT_FILES)
        if not old_meta.exists():
            continue
        meta = atomic.read_json(old_meta, "checkpoint metadata")  # the old layout's: no config, no tokenizer
        for path, key in ((old_weights, "weights_sha256"), (old_state, "state_sha256")):
            if meta.get(key) is not None and (not path.exists() or atomic.sha256_file(path) != meta[key]):
                raise ValueError(f"{path}: missing or sha256 does not match {old_meta.name}; cannot convert")
        state = load_state_file(old_state) if meta.get("state_sha256") is not None else None
        if old_weights.exists():
            model = model_for_run(params, root, run.seed)
            load_weights(model, old_weights)
            keep = {k: v for k, v in meta.items() if k not in ("step", "written_at") and not k.endswith("_sha256")}
            save_checkpoint(root, step=step, model=model, state=state, meta=keep, **run.wildcards)
        else:  # pruned: only the metadata was kept, its files none (null)
            records.write_record(layout.fmt(layout.CKPT_META, root, **kw),
                                 {**dict.fromkeys(k for k, _ in FILES + OPTIONAL_FILES), **meta}, "checkpoint")
        for path in (old_weights, old_state, old_meta):
            path.unlink(missing_ok=True)
        done.append(step)
    if done:
        for end in segment_ends(params["train"]):
            seg = run.path(layout.SEGMENT, root, step=end)
            if seg.exists():
                manifest = atomic.read_json(seg, "segment manifest")
                manifest["checkpoints"] = [manifest_entry(root, step=c["step"], **run.wildcards)
                                           for c in manifest.get("checkpoints", [])]
                records.write_record(seg, manifest, "segment")
    return done
