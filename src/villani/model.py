"""The GPT-Neo causal LM: build it from params (:func:`model_for_run` for a run's dataset),
choose its device, save and load its weights.

The model is always ``transformers.GPTNeoForCausalLM`` with
``attn_implementation="eager"``: flash/SDPA attention kernels support neither double
backward nor forward-mode AD, which every Hessian-vector product needs. Weights are
stored as safetensors (no pickle); tied embeddings (``wte``/``lm_head``) are stored once.
Pretrained weights or configs are loaded by name or local path with remote code off.
"""

from __future__ import annotations

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


def gpt_neo_config(model_cfg: Mapping, vocab_size: int, seq_len: int, eos_token_id: int | None = None):
    """The ``GPTNeoConfig`` for these params (from ``model.name`` when set, else ``model.config``)."""
    _quiet_transformers()
    from transformers import AutoConfig, GPTNeoConfig

    if model_cfg.get("name"):
        config = AutoConfig.from_pretrained(model_cfg["name"], trust_remote_code=False)
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
                eos_token_id: int | None = None) -> torch.nn.Module:
    """A GPT-Neo LM in float32 with eager attention; random init is seeded by ``seed``."""
    _quiet_transformers()
    from transformers import GPTNeoForCausalLM

    config = gpt_neo_config(model_cfg, vocab_size, seq_len, eos_token_id)
    torch.manual_seed(seed)
    if model_cfg.get("init") == "pretrained":
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


def model_for_run(params: Mapping, root, seed: int) -> torch.nn.Module:
    """A freshly initialised model of the params' architecture with the vocabulary (size
    and EOS id) of the tokenized dataset under ``root``; the init is seeded by ``seed``."""
    from villani.io.results import data_stats, vocabulary

    vocab, eos = vocabulary(data_stats(params, root))
    return build_model(params["model"], vocab, params["data"]["seq_len"], seed=seed, eos_token_id=eos)


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


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Write safetensors weights atomically (shared tensors stored once)."""
    from safetensors.torch import save_model

    from villani.io.atomic import write_with

    write_with(path, lambda tmp: save_model(model, str(tmp)))


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
