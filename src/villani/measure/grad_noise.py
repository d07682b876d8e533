r"""Minibatch gradient-noise level σ² for Table I and Theorem 2 (η ≤ λ/(4σ²)).

With :math:`g_B = \nabla L_B(\theta)` the gradient of the mean token loss of a random
minibatch ``B`` of ``train.batch_size`` train blocks, the noise of SGD is
:math:`\xi = g_B - \mathbb E_B\, g_B` (λθ cancels: it is the same for every batch), and

.. math::
    \sigma^2 = \mathbb E\|\xi\|^2 = \operatorname{tr}\operatorname{Cov}(g_B),

summed over all d coordinates — the *total* variance, as :mod:`villani.bounds` uses it,
not a per-coordinate one. From K minibatches drawn independently (each uniformly
without replacement within the batch, by a generator fixed by ``measure.set_seed``, so
the first and the last checkpoint see the same batches),

.. math::
    \hat\sigma^2 = \frac{1}{K-1}\sum_{k=1}^K \|g_k - \bar g\|^2,\qquad
    \bar g = \frac1K\sum_k g_k,

is unbiased. Gradients accumulate in float64.
"""

from __future__ import annotations

import numpy as np
import torch

from villani.plan.frozen import Params

__all__ = ["noise_batch_ids", "gradient_noise"]


def noise_batch_ids(measure: Params, train: Params, n_train: int) -> np.ndarray:
    """``(K, train.batch_size)`` train block ids of the K = ``measure.noise_sigma_batches`` minibatches
    (``measure``, ``train``: those sections of the parameters)."""
    k, b = measure.noise_sigma_batches, train.batch_size
    if b > n_train:
        raise ValueError(f"train.batch_size: {b} > {n_train} train blocks")
    rng = np.random.default_rng([measure.set_seed, 2])
    return np.stack([rng.choice(n_train, size=b, replace=False) for _ in range(k)])


def _flat_grad(model: torch.nn.Module, params: list[torch.nn.Parameter], x: torch.Tensor) -> torch.Tensor:
    from villani.curvature import causal_lm_token_loss

    with torch.enable_grad():
        logits = model(input_ids=x, use_cache=False).logits
        loss = causal_lm_token_loss(logits, x) / (x.shape[0] * (x.shape[1] - 1))
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1).double() for g, p in zip(grads, params)])


def gradient_noise(model: torch.nn.Module, blocks: torch.Tensor, measure: Params, train: Params, device) -> dict:
    r"""σ² (total minibatch gradient variance) at the model's θ, and each batch's ‖g_k‖²
    (``blocks``: the train split's token blocks; ``measure``, ``train``: those sections).

    Streams the batches (one float64 running sum of size d, never K gradients at once):
    :math:`\sum_k\|g_k-\bar g\|^2 = \sum_k\|g_k\|^2 - K\|\bar g\|^2`.
    """
    model.eval()
    ps = [p for p in model.parameters() if p.requires_grad]
    ids = noise_batch_ids(measure, train, blocks.shape[0])
    total, sq_norms = None, []
    for row in ids:
        g = _flat_grad(model, ps, blocks[torch.from_numpy(row)].to(device))
        sq_norms.append(float(g.square().sum()))
        total = g if total is None else total + g
    k = len(ids)
    mean_sq = float((total / k).square().sum())
    return {
        "sigma_sq": max(sum(sq_norms) - k * mean_sq, 0.0) / (k - 1),
        "num_batches": int(k),
        "batch_size": int(ids.shape[1]),
        "grad_sq_norms": np.asarray(sq_norms),
        "mean_grad_sq_norm": mean_sq,
    }
