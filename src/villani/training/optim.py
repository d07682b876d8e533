"""Optimizer, learning-rate schedule and which parameters are regularised.

* ``decoupled`` (paper Table I): AdamW, θ ← θ − η·(m̂/(√v̂+ε) + λθ) on the decayed group.
* ``coupled``: Adam on L(θ) + (λ/2)‖θ_dec‖², the L2 term added to the loss (its gradient
  λθ_dec goes through Adam's preconditioner).
* ``sgd`` (the Langevin arm, eq. 36): plain SGD, θ ← θ − η·∇(loss), no momentum, no
  decoupled decay (λθ comes from the coupled L2 term in the loss).
* Schedule: linear warm-up from 0 to η over ``warmup_steps``, then cosine decay to 0 at
  ``steps``: η_t = η·½(1 + cos(π·(t − w)/(T − w))); or ``constant`` η (eq. 36's fixed step).
"""

from __future__ import annotations

import math

import torch
from transformers import get_constant_schedule

from villani.plan.frozen import Params


def norm_parameter_names(model: torch.nn.Module) -> set[str]:
    """Names of the parameters of normalisation layers — any module whose class name ends
    in ``Norm`` (``LayerNorm``, ``LlamaRMSNorm``, …), in every family."""
    return {f"{mod}.{name}" if mod else name
            for mod, module in model.named_modules() if type(module).__name__.endswith("Norm")
            for name, _ in module.named_parameters(recurse=False)}


def decayed_parameter_names(model: torch.nn.Module, which: str) -> list[str]:
    """Names of the parameters that carry λ: ``all``, ``matrices`` (dim ≥ 2) or
    ``no_bias_norm`` (neither a bias nor a normalisation layer's parameter)."""
    norms = norm_parameter_names(model) if which == "no_bias_norm" else set()
    names = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if which == "all":
            names.append(name)
        elif which == "matrices" and p.dim() >= 2:
            names.append(name)
        elif which == "no_bias_norm" and not (name.endswith(".bias") or name in norms):
            names.append(name)
    return names


def make_optimizer(model: torch.nn.Module, train: Params, lam: float, kind: str = "adamw") -> torch.optim.Optimizer:
    """AdamW (``decay_mode`` decoupled: weight decay λ on the decayed group; coupled: none),
    or for ``kind="sgd"`` plain SGD at ``train.lr``."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if kind == "sgd":
        return torch.optim.SGD([p for _, p in params], lr=train.lr, momentum=0.0, weight_decay=0.0, foreach=False)
    decayed = set(decayed_parameter_names(model, train.decay_params))
    wd = lam if train.decay_mode == "decoupled" else 0.0
    groups = [
        {"params": [p for n, p in params if n in decayed], "weight_decay": wd},
        {"params": [p for n, p in params if n not in decayed], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=train.lr, betas=tuple(train.betas), eps=train.eps, foreach=False,
    )


def lr_factor(step: int, warmup: int, total: int) -> float:
    """Multiplier of the peak lr at optimizer step ``step`` (0-based).

    Kept by hand: ``transformers.get_cosine_schedule_with_warmup`` is not the same schedule
    (``tests/training/test_lr_schedule.py`` measures it). Its warm-up is ``step/w``, ours
    ``(step+1)/w`` — its first step runs at lr 0 and every warm-up step's factor is 1/w lower
    (0.01 at w = 100); after the warm-up the factors are equal bit for bit, and with w = 0 over
    all T steps. Past T its cosine wraps and rises again (ours stays 0); with T ≤ w it
    alternates 1, 0, 1 after the warm-up (ours holds 1). Replacing it would change every
    trained run with a warm-up.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_scheduler(opt: torch.optim.Optimizer, train: Params, *, constant: bool = False
                   ) -> torch.optim.lr_scheduler.LambdaLR:
    """Warm-up + cosine (:func:`lr_factor`), or a constant factor 1 (``constant``:
    ``transformers.get_constant_schedule``)."""
    if constant:
        return get_constant_schedule(opt)
    w, total = train.warmup_steps, train.steps
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, w, total))


def decayed_sq_norm(model: torch.nn.Module, names: set[str]) -> torch.Tensor:
    """Σ_{decayed} ‖θ‖², differentiable: the coupled regulariser is (λ/2) times it
    (:func:`villani.curvature.operators.objective.regularised_loss`)."""
    return torch.stack([p.pow(2).sum() for n, p in model.named_parameters() if n in names]).sum()
