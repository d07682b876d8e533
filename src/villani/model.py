"""The GPT-Neo causal LM: build it from params (:func:`model_for_run` for a run's dataset),
choose its device, save and load it in the Hugging Face layout.

The model is always ``transformers.GPTNeoForCausalLM`` with
``attn_implementation="eager"``: flash/SDPA attention kernels support neither double
backward nor forward-mode AD, which every Hessian-vector product needs.

**Files.** A model is written as a folder ``AutoModelForCausalLM.from_pretrained`` opens:
``config.json`` (:func:`save_config`) and ``model.safetensors`` (:func:`save_weights`:
no pickle, the tied ``lm_head.weight`` = ``transformer.wte.weight`` stored once under the
embedding's name, as ``save_pretrained`` does), each written atomically.

**A named model** (``model.name``, a hub name or a local path) is read from its name only
by the ``pretrained`` stage (:func:`write_pretrained`), which saves its config — and for
``model.init: pretrained`` its weights — into ``results/pretrained/{dataset}/`` with their
sha256 in ``pretrained.json``. Every other job builds the architecture from that folder
(:func:`model_for_run`), so no job but that one touches the hub; remote code is always off.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Mapping

import torch

EAGER = "eager"


def _quiet_transformers() -> None:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - logging only
        pass


def gpt_neo_config(model_cfg: Mapping, vocab_size: int, seq_len: int, eos_token_id: int | None = None,
                   *, named: str | Path | None = None):
    """The ``GPTNeoConfig`` for these params: with ``model.name`` set, the named model's
    config — read from ``named`` (its ``config.json`` saved by the pretrained stage) when
    given, else from ``model.name`` itself; otherwise built from ``model.config``."""
    _quiet_transformers()
    from transformers import AutoConfig, GPTNeoConfig

    if model_cfg.get("name"):
        config = (read_config(named) if named is not None
                  else AutoConfig.from_pretrained(model_cfg["name"], trust_remote_code=False))
        if getattr(config, "model_type", None) != "gpt_neo":
            raise ValueError(f"model.name: {model_cfg['name']} is a {config.model_type!r} model; allowed: gpt_neo")
        if vocab_size > config.vocab_size:
            raise ValueError(
                f"model.name: {model_cfg['name']} has vocab_size {config.vocab_size} < tokenizer's {vocab_size}"
            )
    else:
        kw = dict(model_cfg["config"])
        kw.setdefault("vocab_size", vocab_size)
        kw.setdefault("max_position_embeddings", seq_len)
        if eos_token_id is not None:
            kw.setdefault("eos_token_id", eos_token_id)
            kw.setdefault("bos_token_id", eos_token_id)
        config = GPTNeoConfig(**kw)
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"data.seq_len: {seq_len} > the model's max_position_embeddings {config.max_position_embeddings}")
    p = float(model_cfg.get("dropout", 0.0))
    config.embed_dropout = config.attention_dropout = config.resid_dropout = p
    return config


def build_model(model_cfg: Mapping, vocab_size: int, seq_len: int, *, seed: int,
                eos_token_id: int | None = None, named: str | Path | None = None) -> torch.nn.Module:
    """A GPT-Neo LM in float32 with eager attention; random init is seeded by ``seed``.

    With ``named`` (a config.json, see :func:`gpt_neo_config`) the architecture of the
    named model, randomly initialised — the caller loads the weights it wants. Without it,
    ``model.init: pretrained`` loads ``model.name``'s weights by name (the pretrained stage)."""
    _quiet_transformers()
    from transformers import GPTNeoForCausalLM

    config = gpt_neo_config(model_cfg, vocab_size, seq_len, eos_token_id, named=named)
    torch.manual_seed(seed)
    if model_cfg.get("init") == "pretrained" and named is None:
        model = GPTNeoForCausalLM.from_pretrained(
            model_cfg["name"], config=config, attn_implementation=EAGER, trust_remote_code=False,
            torch_dtype=torch.float32,
        )
    else:
        model = GPTNeoForCausalLM._from_config(config, attn_implementation=EAGER, torch_dtype=torch.float32)
    assert_eager(model)
    return model.float()


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else ``cuda`` when available, else ``cpu``."""
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_for_run(params: Mapping, root, seed: int, *, initial: bool = False) -> torch.nn.Module:
    """A model of the params' architecture with the vocabulary (size and EOS id) of the
    tokenized dataset under ``root``, randomly initialised (seeded by ``seed``) — the
    architecture of ``model.name`` from ``results/pretrained/{dataset}/`` when set.

    ``initial``: the model a run starts from; for ``model.init: pretrained`` the pretrained
    weights saved there, verified against ``pretrained.json``. Loading a checkpoint needs
    no initial weights (they are overwritten)."""
    from villani.io.results import data_stats, vocabulary
    from villani.plan import layout

    vocab, eos = vocabulary(data_stats(params, root))
    m, ds = params["model"], params["data"]["name"]
    load_initial = initial and m.get("init") == "pretrained"
    meta = read_pretrained(root, ds, weights=load_initial) if m.get("name") else None
    if meta is not None and (meta["name"], meta["init"]) != (m["name"], m["init"]):
        raise ValueError(f"{layout.fmt(layout.PRETRAINED_META, root, dataset=ds)}: saved for model.name "
                         f"{meta['name']!r}, init {meta['init']!r}, not {m['name']!r}, {m['init']!r}; "
                         "rerun the pretrained stage (villani pretrained)")
    named = layout.fmt(layout.PRETRAINED_CONFIG, root, dataset=ds) if meta is not None else None
    model = build_model(m, vocab, params["data"]["seq_len"], seed=seed, eos_token_id=eos, named=named)
    if load_initial:
        load_weights(model, layout.fmt(layout.PRETRAINED_WEIGHTS, root, dataset=ds))
    return model


def write_pretrained(params: Mapping, root) -> dict:
    """The ``pretrained`` stage: save ``model.name``'s config (and for ``init: pretrained``
    its weights, loaded by name as is) into ``results/pretrained/{dataset}/`` in the Hugging
    Face layout, then ``pretrained.json`` with name, init and the files' sha256; return it.
    Without ``model.name`` only ``pretrained.json`` (name null) is written."""
    from villani.io import atomic
    from villani.plan import layout

    m, ds = params["model"], params["data"]["name"]
    cfg_path = layout.fmt(layout.PRETRAINED_CONFIG, root, dataset=ds)
    weights = layout.fmt(layout.PRETRAINED_WEIGHTS, root, dataset=ds)
    record = {"name": m.get("name"), "init": m["init"], "config_sha256": None, "weights_sha256": None}
    if not m.get("name"):  # nothing to save (the DVC stage runs for every parameter set)
        cfg_path.unlink(missing_ok=True)
        weights.unlink(missing_ok=True)
        atomic.write_json(layout.fmt(layout.PRETRAINED_META, root, dataset=ds), record)
        return record
    _quiet_transformers()
    from transformers import AutoConfig, GPTNeoForCausalLM

    from villani.data.hub import model_error

    try:
        config = AutoConfig.from_pretrained(m["name"], trust_remote_code=False)
        if getattr(config, "model_type", None) != "gpt_neo":
            raise ValueError(f"model.name: {m['name']} is a {config.model_type!r} model; allowed: gpt_neo")
        model = GPTNeoForCausalLM.from_pretrained(m["name"], attn_implementation=EAGER, trust_remote_code=False,
                                                  dtype=torch.float32) if m["init"] == "pretrained" else None
    except OSError as e:
        raise model_error(m["name"], e) from None
    if model is not None:
        save_weights(model, weights)
        config = model.config
        record["weights_sha256"] = atomic.sha256_file(weights)
    else:
        weights.unlink(missing_ok=True)
    save_config(config, cfg_path)
    record["config_sha256"] = atomic.sha256_file(cfg_path)
    atomic.write_json(layout.fmt(layout.PRETRAINED_META, root, dataset=ds), record)
    return record


def read_pretrained(root, dataset: str, *, weights: bool = True) -> dict:
    """``pretrained.json`` of a dataset, its config (and with ``weights`` its weights)
    verified against their sha256."""
    from villani.io import atomic
    from villani.plan import layout

    path = layout.fmt(layout.PRETRAINED_META, root, dataset=dataset)
    if not path.exists():
        raise ValueError(f"{path}: not found; model.name is read from results/pretrained/{dataset}/, written once "
                         f"by the pretrained stage (villani pretrained --dataset {dataset})")
    meta = atomic.read_json(path, "pretrained model record")
    files = [(layout.PRETRAINED_CONFIG, "config_sha256")] + ([(layout.PRETRAINED_WEIGHTS, "weights_sha256")]
                                                              if weights else [])
    for pattern, key in files:
        f = layout.fmt(pattern, root, dataset=dataset)
        if meta.get(key) is None:
            continue
        if not f.exists():
            raise ValueError(f"{f}: missing although {path.name} lists it (rerun villani pretrained)")
        if atomic.sha256_file(f) != meta[key]:
            raise ValueError(f"{f}: sha256 does not match {path.name} (corrupt or modified; rerun villani pretrained)")
    return meta


def assert_eager(model: torch.nn.Module) -> None:
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != EAGER:
        raise ValueError(f"model attention is {impl!r}; curvature needs attn_implementation='eager'")


def num_params(model: torch.nn.Module) -> int:
    """d: the number of trainable parameters (tied tensors counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def theta_sq_norm(model: torch.nn.Module) -> float:
    """‖θ‖² over every trainable parameter, accumulated in float64."""
    with torch.no_grad():
        return float(sum(p.detach().double().pow(2).sum() for p in model.parameters() if p.requires_grad))


def hf_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors ``save_pretrained`` writes: the state dict without ``lm_head.weight``
    when it is tied to (the same tensor as) ``transformer.wte.weight``."""
    state = model.state_dict()
    tied = ("lm_head.weight" in state and "transformer.wte.weight" in state
            and state["lm_head.weight"].data_ptr() == state["transformer.wte.weight"].data_ptr())
    return {k: v.detach().contiguous() for k, v in state.items() if not (tied and k == "lm_head.weight")}


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Write ``model.safetensors`` atomically: :func:`hf_tensors`, metadata ``format: pt``
    (what ``from_pretrained`` expects)."""
    from safetensors.torch import save_file

    from villani.io.atomic import write_with

    tensors = {k: v.cpu() for k, v in hf_tensors(model).items()}
    write_with(path, lambda tmp: save_file(tensors, str(tmp), metadata={"format": "pt"}))


def save_config(config, path: str | Path) -> None:
    """Write a model's ``config.json`` atomically (``architectures`` = GPTNeoForCausalLM)."""
    from villani.io.atomic import write_text

    config = copy.deepcopy(config)
    config.architectures = ["GPTNeoForCausalLM"]
    write_text(path, config.to_json_string(use_diff=False))


def read_config(path: str | Path):
    """A ``config.json`` as a ``GPTNeoConfig``; a missing or malformed file is a one-line ValueError."""
    from transformers import GPTNeoConfig

    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: model config not found")
    try:
        return GPTNeoConfig.from_json_file(str(path))
    except (OSError, ValueError, TypeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: not a valid model config ({msg[:200]})") from None


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load safetensors weights into ``model``; a missing, corrupt or mismatched file is a one-line ValueError."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: checkpoint weights not found")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, RuntimeError, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: corrupt or truncated safetensors file ({msg})") from None
    own = model.state_dict()
    for name, t in state.items():
        if name not in own:
            raise ValueError(f"{path}: tensor {name!r} does not belong to this model (another model shape?)")
        if tuple(t.shape) != tuple(own[name].shape):
            raise ValueError(
                f"{path}: tensor {name!r} has shape {tuple(t.shape)}, the model expects {tuple(own[name].shape)}"
            )
        if t.dtype != own[name].dtype:
            raise ValueError(f"{path}: tensor {name!r} has dtype {t.dtype}, the model expects {own[name].dtype}")
    missing = [n for n in own if n not in state and not _is_tied(model, n, state)]
    if missing:
        raise ValueError(f"{path}: missing tensor {missing[0]!r} ({len(missing)} missing; another model shape?)")
    model.load_state_dict(state, strict=False)
    return model


_TIED_PAIR = {"lm_head.weight": "transformer.wte.weight", "transformer.wte.weight": "lm_head.weight"}


def _is_tied(model: torch.nn.Module, name: str, state) -> bool:
    """``name`` is one of the tied embedding pair and the file holds the other one.

    safetensors' ``save_model`` stores a shared tensor once under either name (it keeps
    ``lm_head.weight`` with transformers 5), so either may be the one missing.
    """
    partner = _TIED_PAIR.get(name)
    return partner is not None and partner in state and bool(getattr(model.config, "tie_word_embeddings", True))
