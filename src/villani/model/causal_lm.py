"""The causal LM: build it from params (:func:`model_for_run` for a run's dataset), open a
pretrained one (:func:`load_causal_lm`), choose its device, save and load it in the Hugging
Face layout.

Any Hugging Face ``AutoModelForCausalLM`` family: ``model.config.model_type`` (default
``gpt_neo``) picks the config class (``AutoConfig.for_model``) whose keyword arguments are
the rest of ``model.config``; ``model.name`` (hub name or local path) takes the named
model's config instead, whatever its family. Training, measurement, rays and landscape are
tested on GPT-Neo, GPT-2, GPT-NeoX/Pythia and Llama (``tests/measure/test_families.py``).
Attention is always ``attn_implementation="eager"``: flash/SDPA attention kernels
support neither double backward nor forward-mode AD, which every Hessian-vector product
needs.

**Files.** A model is written as a folder ``AutoModelForCausalLM.from_pretrained`` opens:
``config.json`` (:func:`save_config`, ``architectures`` = the family's causal-LM class) and
``model.safetensors`` (:func:`save_weights`: no pickle, a tied tensor — the output layer
tied to the token embedding — stored once under the name ``save_pretrained`` keeps,
:func:`hf_tensors`), each written atomically.

**A named model** (``model.name``, a hub name or a local path, any family) is read from
its name only by the ``pretrained`` stage (:func:`write_pretrained`), which saves its
config — and for ``model.init: pretrained`` its weights — into
``results/pretrained/{dataset}/`` with their sha256 in ``pretrained.json``. Every other job
builds the architecture from that folder (:func:`model_for_run`), so no job but that one
touches the hub; remote code is always off.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import warnings
from pathlib import Path
from typing import Mapping

import torch

from villani.plan.families import DEFAULT_FAMILY

EAGER = "eager"


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


def model_config(model_cfg: Mapping, vocab_size: int, seq_len: int, eos_token_id: int | None = None,
                 *, named: str | Path | None = None):
    """The transformers config for these params: ``model.name``'s when set (any family) —
    read from ``named`` (its ``config.json`` saved by the pretrained stage) when given, else
    from ``model.name`` itself — else ``model.config`` (family ``model.config.model_type``,
    default ``gpt_neo``) with ``vocab_size``, ``max_position_embeddings`` and the BOS/EOS ids
    filled in unless given."""
    _quiet_transformers()
    from transformers import AutoConfig

    if model_cfg.get("name"):
        config = (read_config(named) if named is not None
                  else AutoConfig.from_pretrained(model_cfg["name"], revision=model_cfg.get("revision"),
                                                  trust_remote_code=False))
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
    _set_dropout(config, model_cfg.get("dropout", 0.0))
    return config


def build_model(model_cfg: Mapping, vocab_size: int, seq_len: int, *, seed: int,
                eos_token_id: int | None = None, named: str | Path | None = None) -> torch.nn.Module:
    """The causal LM of these params in float32 with eager attention
    (``AutoModelForCausalLM``); random init is seeded by ``seed``.

    With ``named`` (a config.json, see :func:`model_config`) the architecture of the named
    model, randomly initialised — the caller loads the weights it wants. Without it,
    ``model.init: pretrained`` loads ``model.name``'s weights by name (the pretrained stage)."""
    _quiet_transformers()
    from transformers import AutoModelForCausalLM

    config = model_config(model_cfg, vocab_size, seq_len, eos_token_id, named=named)
    torch.manual_seed(seed)
    if model_cfg.get("init") == "pretrained" and named is None:
        model = AutoModelForCausalLM.from_pretrained(
            model_cfg["name"], config=config, attn_implementation=EAGER, trust_remote_code=False,
            dtype=torch.float32, revision=model_cfg.get("revision"),
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
    import pickle

    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM

    from villani.data import hub

    try:
        with warnings.catch_warnings():  # torch's note on a pickle protocol: the error below says it
            warnings.simplefilter("ignore", UserWarning)
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), attn_implementation=EAGER,
                                                         trust_remote_code=False, dtype=torch.float32)
    except SafetensorError as e:
        raise ValueError(f"--model: {name_or_path!r}: model.safetensors is truncated or corrupt ({str(e)[:200]}); "
                         "copy it again (a villani checkpoint: retrain its segment)") from None
    except (pickle.UnpicklingError, RuntimeError, EOFError) as e:  # torch.load(weights_only=True) of a .bin
        where = next((str(f) for f in Path(str(name_or_path)).glob("pytorch_model*.bin")), repr(str(name_or_path)))
        why = ("a pickle that needs code to load, refused (weights load with weights_only=True)"
               if isinstance(e, pickle.UnpicklingError) else
               f"truncated or corrupt ({' '.join(str(e).split())[:120] or type(e).__name__})")
        raise ValueError(f"--model: {where}: cannot be read as plain tensors: {why}") from None
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


def model_for_run(params: Mapping, root, seed: int, *, initial: bool = False) -> torch.nn.Module:
    """A model of the params' architecture with the vocabulary (size and EOS id) of the
    tokenized dataset under ``root``, randomly initialised (seeded by ``seed``) — the
    architecture of ``model.name`` from ``results/pretrained/{dataset}/`` when set.

    ``initial``: the model a run starts from; for ``model.init: pretrained`` the pretrained
    weights saved there, verified against ``pretrained.json``. Loading a checkpoint needs
    no initial weights (they are overwritten)."""
    from villani.io.results import data_stats, vocabulary
    from villani.plan import layout
    from villani.plan.writers import how_to_rewrite

    vocab, eos = vocabulary(data_stats(params, root))
    m, ds = params["model"], params["data"]["name"]
    load_initial = initial and m.get("init") == "pretrained"
    meta = read_pretrained(root, ds, weights=load_initial) if m.get("name") else None
    if meta is not None and (meta["name"], meta["init"]) != (m["name"], m["init"]):
        raise ValueError(f"{layout.fmt(layout.PRETRAINED_META, root, dataset=ds)}: saved for model.name "
                         f"{meta['name']!r}, init {meta['init']!r}, not {m['name']!r}, {m['init']!r}; "
                         f"{how_to_rewrite(layout.fmt(layout.PRETRAINED_META, root, dataset=ds))}")
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
    from villani.io import atomic, records
    from villani.plan import layout

    m, ds = params["model"], params["data"]["name"]
    cfg_path = layout.fmt(layout.PRETRAINED_CONFIG, root, dataset=ds)
    weights = layout.fmt(layout.PRETRAINED_WEIGHTS, root, dataset=ds)
    record = {"name": m.get("name"), "revision": m.get("revision"), "init": m["init"], "config_sha256": None,
              "weights_sha256": None}
    if not m.get("name"):  # nothing to save (the DVC stage runs for every parameter set)
        cfg_path.unlink(missing_ok=True)
        weights.unlink(missing_ok=True)
        records.write_record(layout.fmt(layout.PRETRAINED_META, root, dataset=ds), record, "pretrained")
        return record
    _quiet_transformers()
    from transformers import AutoConfig, AutoModelForCausalLM

    from villani.data.hub import model_error

    try:
        config = AutoConfig.from_pretrained(m["name"], revision=m.get("revision"), trust_remote_code=False)
        _causal_lm_class(config, f"model.name: {m['name']}")
        model = AutoModelForCausalLM.from_pretrained(m["name"], revision=m.get("revision"), attn_implementation=EAGER,
                                                     trust_remote_code=False, dtype=torch.float32
                                                     ) if m["init"] == "pretrained" else None
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
    records.write_record(layout.fmt(layout.PRETRAINED_META, root, dataset=ds), record, "pretrained")
    return record


def read_pretrained(root, dataset: str, *, weights: bool = True) -> dict:
    """``pretrained.json`` of a dataset, its config (and with ``weights`` its weights)
    verified against their sha256."""
    from villani.io import atomic, records
    from villani.plan import layout
    from villani.plan.writers import how_to_rewrite

    path = layout.fmt(layout.PRETRAINED_META, root, dataset=dataset)
    if not path.exists():
        raise ValueError(f"{path}: not found; model.name is read from results/pretrained/{dataset}/, written once "
                         f"by the pretrained stage: {how_to_rewrite(path)}")
    meta = records.check("pretrained", atomic.read_json(path, "pretrained model record"), path)
    files = [(layout.PRETRAINED_CONFIG, "config_sha256")] + ([(layout.PRETRAINED_WEIGHTS, "weights_sha256")]
                                                              if weights else [])
    for pattern, key in files:
        f = layout.fmt(pattern, root, dataset=dataset)
        if meta.get(key) is None:
            continue
        if not f.exists():
            raise ValueError(f"{f}: missing although {path.name} lists it; {how_to_rewrite(path)}")
        if atomic.sha256_file(f) != meta[key]:
            raise ValueError(f"{f}: sha256 does not match {path.name} (corrupt or modified); {how_to_rewrite(path)}")
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
    return float(theta_sq_tensor(model))


def theta_sq_tensor(model: torch.nn.Module) -> torch.Tensor:
    """:func:`theta_sq_norm` as a float64 tensor on the parameters' device (no host sync)."""
    with torch.no_grad():
        return sum(p.detach().double().pow(2).sum() for p in model.parameters() if p.requires_grad)


def hf_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors ``save_pretrained`` writes: the state dict with each tied tensor
    (:func:`tied_names`) once, under the name the model does not re-tie on loading — a name
    of ``model._tied_weights_keys`` (e.g. ``lm_head.weight``, tied to the token embedding)
    is dropped, else the first name in state-dict order is kept."""
    state = model.state_dict()
    retied = getattr(model, "_tied_weights_keys", None) or ()
    retied = set(retied) if not isinstance(retied, str) else {retied}
    drop = set()
    for name, others in tied_names(model).items():
        group = [n for n in state if n == name or n in others]
        keep = next((n for n in group if n not in retied), group[0])
        drop |= set(group) - {keep}
    return {k: v.detach().contiguous() for k, v in state.items() if k not in drop}


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Write ``model.safetensors`` atomically: :func:`hf_tensors`, metadata ``format: pt``
    (what ``from_pretrained`` expects). The bytes go through our atomic writer, so the file
    gets the umask's mode (0644 under umask 022) — safetensors' ``save_file`` swaps in a
    0600 file of its own."""
    from safetensors.torch import save

    from villani.io.atomic import write_bytes

    tensors = {k: v.cpu() for k, v in hf_tensors(model).items()}
    write_bytes(path, save(tensors, metadata={"format": "pt"}))


def _causal_lm_class(config, where: str) -> str:
    """The name of the causal-LM class of ``config``'s family (``GPTNeoForCausalLM``,
    ``GPT2LMHeadModel``, ``LlamaForCausalLM``, …); a family without one is a one-line ValueError."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    family = getattr(config, "model_type", None)
    if family not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ValueError(f"{where} is a {family!r} model, not a transformers causal LM (e.g. gpt_neo, gpt2, gpt_neox, "
                         "llama)")
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[family]


def save_config(config, path: str | Path) -> None:
    """Write a model's ``config.json`` atomically, its family's causal-LM class as
    ``architectures`` (what ``AutoModelForCausalLM.from_pretrained`` builds)."""
    from villani.io.atomic import write_text

    config = copy.deepcopy(config)
    config.architectures = [_causal_lm_class(config, str(path))]
    write_text(path, config.to_json_string(use_diff=False))


def read_config(path: str | Path):
    """A ``config.json`` as the config class of its ``model_type`` (any causal-LM family);
    a missing or malformed file is a one-line ValueError."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: model config not found")
    try:
        family = json.loads(path.read_text()).get("model_type")
        if family not in CONFIG_MAPPING:
            raise ValueError(f"model_type {family!r} is not a transformers model family")
        config = CONFIG_MAPPING[family].from_json_file(str(path))
    except (OSError, ValueError, TypeError, AttributeError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: not a valid model config ({msg[:200]})") from None
    _causal_lm_class(config, str(path))
    return config


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
