"""A micro GPT-Neo (d ≈ 1.4k: vocab 256, hidden 4, 2 layers) trained for real, once per session.

Small enough for the exact float64 Hessian (torch.func), real enough to go through the
whole pipeline: ``villani.data.tokenize`` → ``villani.training.train_segment`` →
``measure_checkpoint`` / ``run_rays`` / ``run_landscape``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import tiny_params

MICRO = {
    "data": {"name": "micro", "tokenizer": {"kind": "bpe", "vocab_size": 256}, "seq_len": 16,
             "max_blocks": {"train": 300, "validation": 20, "test": 20}},
    "model": {"config": {"hidden_size": 4, "num_layers": 2, "num_heads": 2, "intermediate_size": 8, "window_size": 8,
                         "attention_types": [[["global", "local"], 1]]}},
    "train": {"lambdas": [0.0, 0.01], "seeds": [0], "steps": 12, "checkpoints": {"count": 2}, "segments": 1,
              "batch_size": 8, "warmup_steps": 2, "lr": 0.02},
    "measure": {"blocks": 6, "batch_size": 4, "num_probes": 16, "top_k": 3, "lanczos_steps": 12, "slq_probes": 2,
                "slq_steps": 8, "noise_sigma_batches": 4, "s_values": [1.0, 2.0],
                "trace_estimator": "hutchinson"},  # plain probes 0..M−1, checked per probe; deflated: test_measure_cost.py
    "rays": {"count": 2, "lambdas": [0.0, 0.01, 10.0], "points": 6, "fit_points": 3, "num_probes": 4,
             "theta_sq_min": 100.0, "theta_sq_max": 1.0e6},
    "landscape": {"lambdas": [0.0, 0.01], "grid": 5, "span": 0.5},
}


def micro_params(**overrides) -> dict:
    """tiny_params with the micro overlay, then ``overrides`` (group → dict)."""
    from villani.plan.config import deep_merge

    doc = MICRO
    for group, values in overrides.items():
        doc = deep_merge(doc, {group: values})
    return tiny_params(**doc)


@pytest.fixture(scope="session")
def micro(tmp_path_factory) -> tuple[dict, Path]:
    """(params, results root) with the micro corpus tokenized and runs λ ∈ {0, 0.01}, seed 0, trained."""
    from villani.data import tokenize
    from villani.plan import layout
    from villani.plan.schedule import segment_ends
    from villani.training import train_segment

    torch.set_num_threads(1)
    p = micro_params()
    root = tmp_path_factory.mktemp("micro-results")
    tokenize(p["data"], layout.fmt(layout.DATA_DIR, root, dataset=p["data"]["name"]))
    for lam in p["train"]["lambdas"]:
        for end in segment_ends(p["train"]):
            train_segment(p, variant="adamw", lam=lam, seed=0, end=end, root=root, device="cpu", progress=False)
    return p, root


@pytest.fixture(scope="session")
def measured(micro) -> dict:
    """measure_checkpoint run on every checkpoint of the λ = 0.01 run and step 12 of λ = 0: {(λ, step): json path}."""
    from villani.measure import measure_checkpoint
    from villani.plan.schedule import checkpoint_steps

    p, root = micro
    out = {}
    for step in checkpoint_steps(p["train"]):
        out[(0.01, step)] = measure_checkpoint(p, variant="adamw", lam=0.01, seed=0, step=step, root=root, device="cpu")
    out[(0.0, 12)] = measure_checkpoint(p, variant="adamw", lam=0.0, seed=0, step=12, root=root, device="cpu")
    return out


def load_micro_model(p: dict, root: Path, lam: float, step: int, dtype=torch.float64, seed: int = 0):
    """The checkpoint's model, loaded with safetensors directly (not through villani's loader)."""
    from safetensors.torch import load_file

    from villani.model.causal_lm import build_model
    from villani.plan import layout

    stats = __import__("json").loads(layout.fmt(layout.DATA_STATS, root, dataset="micro").read_text())
    model = build_model(p["model"], stats["vocab_size"], p["data"]["seq_len"], seed=0, eos_token_id=stats.get("eos_token_id"))
    state = load_file(str(layout.fmt(layout.CKPT_WEIGHTS, root, dataset="micro", variant="adamw", lam=lam, seed=seed,
                                     step=step)))
    if "transformer.wte.weight" not in state:
        state["transformer.wte.weight"] = state["lm_head.weight"]
    model.load_state_dict(state, strict=False)
    return model.to(dtype).eval()


def set_ids(p: dict, n_train: int) -> np.ndarray:
    """The documented measurement-set rule, re-implemented: sorted default_rng(set_seed).choice."""
    rng = np.random.default_rng(p["measure"]["set_seed"])
    return np.sort(rng.choice(n_train, size=p["measure"]["blocks"], replace=False))
