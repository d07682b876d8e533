"""Checkpoints: safetensors weights + JSON metadata + resumable optimizer/RNG state.

A checkpoint at step t is three files written atomically (temp + fsync + rename), the JSON
last, holding the sha256 of the other two: a checkpoint is complete exactly when its JSON
exists and the hashes match, so a half-written checkpoint is never read. State files are
loaded with ``torch.load(weights_only=True)`` (no pickle code execution).
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any, Mapping

import torch

from villani.io import atomic
from villani.io.results import read_checkpoint_meta
from villani.model import load_weights, model_for_run, pick_device, save_weights
from villani.plan import layout
from villani.plan.runs import Run


def _paths(root, dataset, variant, lam, seed, step) -> tuple[Path, Path, Path]:
    kw = dict(dataset=dataset, variant=variant, lam=lam, seed=seed, step=step)
    return (layout.fmt(layout.CKPT_WEIGHTS, root, **kw), layout.fmt(layout.CKPT_STATE, root, **kw),
            layout.fmt(layout.CKPT_META, root, **kw))


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


def save_checkpoint(root, dataset, variant, lam, seed, step, model, state: Mapping | None, meta: Mapping) -> dict:
    """Write weights, state (unless None) and, last, the JSON with their sha256; return the JSON dict."""
    w, s, m = _paths(root, dataset, variant, lam, seed, step)
    save_weights(model, w)
    if state is not None:
        save_state_file(s, state)
    meta = dict(meta, step=int(step), weights_sha256=atomic.sha256_file(w),
                state_sha256=atomic.sha256_file(s) if state is not None else None, written_at=time.time())
    atomic.write_json(m, meta)
    return meta


def read_meta(root, dataset, variant, lam, seed, step, *, verify: bool = True) -> dict:
    """The checkpoint JSON; with ``verify`` the weights and state must match their sha256."""
    w, s, m = _paths(root, dataset, variant, lam, seed, step)
    meta = read_checkpoint_meta(m)
    if verify:
        for path, key in ((w, "weights_sha256"), (s, "state_sha256")):
            if meta.get(key) is None and key == "state_sha256":
                continue  # optimizer state kept only at segment ends (train.keep_state)
            if not path.exists():
                raise ValueError(f"{path}: missing although {m.name} lists it (incomplete checkpoint)")
            if atomic.sha256_file(path) != meta[key]:
                raise ValueError(f"{path}: sha256 does not match {m.name} (corrupt or modified checkpoint)")
    return meta


def load_checkpoint(root, dataset, variant, lam, seed, step, model, *, with_state: bool = False):
    """Verify and load a checkpoint into ``model``; return (meta, state or None)."""
    w, s, _ = _paths(root, dataset, variant, lam, seed, step)
    meta = read_meta(root, dataset, variant, lam, seed, step)
    load_weights(model, w)
    return meta, (load_state_file(s) if with_state else None)


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
