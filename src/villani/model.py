"""The causal LM: build it from params (:func:`model_for_run` for a run's dataset), open a
pretrained one (:func:`load_causal_lm`), choose its device, save and load its weights.

Any Hugging Face ``AutoModelForCausalLM`` family: ``model.config.model_type`` (default
``gpt_neo``) picks the config class (``AutoConfig.for_model``) whose keyword arguments are
the rest of ``model.config``; ``model.name`` (hub name or local path) takes the named
model's config instead, whatever its family. Training, measurement, rays and landscape are
tested on GPT-Neo, GPT-2, GPT-NeoX/Pythia and Llama (``tests/measure/test_families.py``).
Attention is always ``attn_implementation="eager"``: flash/SDPA attention kernels
support neither double backward nor forward-mode AD, which every Hessian-vector product
needs. Weights are stored as safetensors (no pickle); tied tensors (the output layer tied
to the token embedding) are stored once. Pretrained weights or configs are loaded by name
or local path with remote code off.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Mapping

import torch

EAGER = "eager"
DEFAULT_FAMILY = "gpt_neo"
"""``model_type`` of a ``model.config`` that names none."""


def _quiet_transformers() -> None:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - logging only
        pass


def _config_from_params(config_kw: Mapping):
    """The config class of ``model_type`` called with the rest of ``model.config`` (as
    ``AutoConfig.for_model``). An unknown family, one without a causal-LM class, a key the
    family's config does not use (e.g. GPT-Neo's ``window_size`` left in a Llama config by a
    merged parameter file) or an invalid config is a one-line ValueError."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    kw = dict(config_kw)
    family = str(kw.pop("model_type", DEFAULT_FAMILY))
    if family not in CONFIG_MAPPING or family not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ValueError(f"model.config.model_type: {family!r} is not a transformers causal-LM family "
                         "(e.g. gpt_neo, gpt2, gpt_neox, llama)")
    cls = CONFIG_MAPPING[family]
    known = set(inspect.signature(cls.__init__).parameters) | set(getattr(cls, "attribute_map", {}))
    for key in sorted(set(kw) - known):
        # a key the family's config merely stores (instead of consuming it, as Llama does
        # rope_theta) is used by no model code
        if key in vars(_config_or_error(cls, {key: kw[key]}, family)):
            raise ValueError(f"model.config.{key}: not a parameter of {family} models ({cls.__name__}; a key of "
                             "another family kept from an earlier parameter file? give the whole model.config "
                             "in one file)")
    return _config_or_error(cls, kw, family)


def _config_or_error(cls, kw: Mapping, family: str):
    from huggingface_hub.errors import StrictDataclassError

    try:
        return cls(**kw)
    except (ValueError, TypeError, StrictDataclassError) as e:
        cause = e.__cause__ or e
        text = str(cause).strip().splitlines()
        raise ValueError(f"model.config: not a valid {family} config ({text[-1] if text else type(e).__name__})") from None


def _set_dropout(config, p: float) -> None:
    """Every dropout probability of the config (``*dropout``, ``*_pdrop``; not a
    classification head's) to ``p``."""
    for key in list(config.to_dict()):
        if key.endswith(("dropout", "_pdrop")) and not key.startswith(("classifier", "summary")):
            setattr(config, key, p)


def model_config(model_cfg: Mapping, vocab_size: int, seq_len: int, eos_token_id: int | None = None):
    """The transformers config for these params: ``model.name``'s when set (any family),
    else ``model.config`` (family ``model.config.model_type``, default ``gpt_neo``) with
    ``vocab_size``, ``max_position_embeddings`` and the BOS/EOS ids filled in unless given."""
    _quiet_transformers()
    from transformers import AutoConfig

    if model_cfg.get("name"):
        config = AutoConfig.from_pretrained(model_cfg["name"], trust_remote_code=False)
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
        config = _config_from_params(kw)
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"data.seq_len: {seq_len} > the model's max_position_embeddings {config.max_position_embeddings}")
    _set_dropout(config, float(model_cfg.get("dropout", 0.0)))
    return config


def build_model(model_cfg: Mapping, vocab_size: int, seq_len: int, *, seed: int,
                eos_token_id: int | None = None) -> torch.nn.Module:
    """The causal LM of these params in float32 with eager attention
    (``AutoModelForCausalLM``); random init is seeded by ``seed``."""
    _quiet_transformers()
    from transformers import AutoModelForCausalLM

    config = model_config(model_cfg, vocab_size, seq_len, eos_token_id)
    torch.manual_seed(seed)
    if model_cfg.get("init") == "pretrained":
        model = AutoModelForCausalLM.from_pretrained(
            model_cfg["name"], config=config, attn_implementation=EAGER, trust_remote_code=False,
            dtype=torch.float32,
        )
    else:
        model = AutoModelForCausalLM.from_config(config, attn_implementation=EAGER, dtype=torch.float32)
    assert_eager(model)
    return model.float()


def load_causal_lm(name_or_path: str) -> torch.nn.Module:
    """A pretrained causal LM by hub name or local directory (``save_pretrained`` layout),
    in float32, eager attention, eval mode, remote code off. A directory or name that
    holds no causal LM, or a hub model neither cached nor reachable, is a one-line ValueError."""
    _quiet_transformers()
    from transformers import AutoModelForCausalLM

    from villani.data import hub

    try:
        model = AutoModelForCausalLM.from_pretrained(str(name_or_path), attn_implementation=EAGER,
                                                     trust_remote_code=False, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if not Path(str(name_or_path)).exists() and hub.is_hub_name(str(name_or_path)) and (
                hub.offline() or "connect" in first.lower()):
            raise hub.not_cached("--model", f"model {name_or_path!r}") from None
        raise ValueError(f"--model: cannot load a causal LM from {name_or_path!r}: {first[:300]}") from None
    assert_eager(model)
    return model.float().eval()


def describe_model(model: torch.nn.Module) -> dict:
    """Family, class and size of a causal LM, for the records stages write (canonical
    config names; ``None`` where a family has no such setting)."""
    cfg = model.config
    out = {"model_type": cfg.model_type, "architecture": type(model).__name__, "d": num_params(model)}
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "max_position_embeddings", "tie_word_embeddings"):
        value = getattr(cfg, key, None)
        out[key] = value if value is None or isinstance(value, bool) else int(value)
    return out


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


def tied_names(model: torch.nn.Module) -> dict[str, list[str]]:
    """State-dict name → the other names of the same tensor (tied weights, e.g. the output
    layer tied to the token embedding), for every name that has one."""
    by_storage: dict[tuple, list[str]] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        by_storage.setdefault((t.device, t.data_ptr(), t.dtype, tuple(t.shape)), []).append(name)
    return {n: [m for m in names if m != n] for names in by_storage.values() if len(names) > 1 for n in names}


def _is_tied(model: torch.nn.Module, name: str, state) -> bool:
    """``name`` is tied to a tensor the file holds.

    safetensors' ``save_model`` stores a shared tensor once under either name (it keeps
    ``lm_head.weight`` with transformers 5), so either may be the one missing.
    """
    return any(other in state for other in tied_names(model).get(name, ()))
