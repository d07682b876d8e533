"""The update rule of each variant: the Langevin arm is eq. (36) exactly, Adam on F is coupled."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import torch

from tests.conftest import tiny_params
from villani.model.causal_lm import model_for_run
from villani.plan import layout
from villani.training import train_segment
from villani.training.batches import batch_indices
from villani.training.checkpoint import load_checkpoint, read_meta


def _root(tmp_path, data_root):
    root = tmp_path / "results"
    shutil.copytree(data_root / "data", root / "data")
    return root


def test_langevin_step_is_eq36(tmp_path, tiny_data_root):
    """θ₁ = θ₀ − η(∇L_B(θ₀) + λθ₀) + √(2η/β)·Z, Z ~ N(0, I) from the run's noise stream, β = 2/(η·std²)."""
    from villani.data import load_blocks

    lam, eta, std = 0.01, 0.05, 0.05
    p = tiny_params(train={"steps": 2, "warmup_steps": 1, "checkpoints": {"steps": [1, 2]}, "segments": 1,
                           "grad_clip": 0.01,
                           "langevin": {"lambdas": [lam], "lr": eta, "beta": "table1", "table1_std": std}})
    root = _root(tmp_path, tiny_data_root)
    train_segment(p, variant="langevin", lam=lam, seed=0, end=2, root=root, device="cpu", progress=False)
    meta = read_meta(root, "tiny", "langevin", lam, 0, 1)
    assert meta["update_rule"] == "langevin" and meta["decay_mode"] == "coupled" and meta["lr_peak"] == eta
    assert meta["langevin_beta"] == 2 / (eta * std**2)
    log = pd.read_csv(layout.fmt(layout.SEGMENT_LOG, root, dataset="tiny", variant="langevin", lam=lam, seed=0, step=2))
    assert list(log["lr"]) == [eta, eta]  # constant η: no warm-up, no cosine decay

    model = model_for_run(p, root, 0)
    model.train()
    blocks = load_blocks(layout.fmt(layout.SPLIT, root, dataset="tiny", split="train"))
    x = blocks[batch_indices(len(blocks), int(p["train"]["batch_size"]), 0, 0)]
    loss = model(input_ids=x, labels=x).loss + 0.5 * lam * sum(q.pow(2).sum() for q in model.parameters())
    grads = torch.autograd.grad(loss, list(model.parameters()))
    gen = torch.Generator().manual_seed(0 * 7919 + 17)
    scale = math.sqrt(2 * eta / meta["langevin_beta"])  # = η·std: no clipping (grad_clip ignored), constant η
    assert abs(scale - eta * std) < 1e-12
    expected = [q.detach() - eta * g + scale * torch.randn(q.shape, generator=gen)
                for q, g in zip(model.parameters(), grads)]
    trained = model_for_run(p, root, 0)
    load_checkpoint(root, "tiny", "langevin", lam, 0, 1, trained)
    for want, got in zip(expected, trained.parameters()):
        torch.testing.assert_close(got.detach(), want, rtol=1e-5, atol=1e-6)


def test_adam_l2_is_coupled_adam_and_differs_from_adamw(tmp_path, tiny_data_root):
    p = tiny_params(train={"adam_l2": {"lambdas": [0.01]}})
    metas = {}
    for variant in ("adamw", "adam_l2"):
        root = _root(tmp_path / variant, tiny_data_root)
        for end in (12, 24):
            train_segment(p, variant=variant, lam=0.01, seed=0, end=end, root=root, device="cpu", progress=False)
        metas[variant] = read_meta(root, "tiny", variant, 0.01, 0, 24)
    assert metas["adam_l2"]["decay_mode"] == "coupled" and metas["adam_l2"]["update_rule"] == "adam_l2"
    assert metas["adamw"]["decay_mode"] == "decoupled" and metas["adamw"]["update_rule"] == "adamw"
    assert metas["adam_l2"]["weights_sha256"] != metas["adamw"]["weights_sha256"]
    assert metas["adam_l2"]["lr_peak"] == metas["adamw"]["lr_peak"] == p["train"]["lr"]
