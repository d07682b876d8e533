"""Shared test cases for the curvature engine: dense float64 matrices with a known
spectrum and a tiny GPT-Neo (a couple of thousand parameters) with its autograd loss."""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call
from transformers import GPTNeoConfig, GPTNeoForCausalLM

from villani.curvature import causal_lm_token_loss


def matrix_with_spectrum(eigenvalues, seed: int) -> torch.Tensor:
    """Q diag(λ) Qᵀ in float64 with a Haar-random orthogonal Q fixed by ``seed``."""
    lam = torch.as_tensor(np.asarray(eigenvalues, dtype=np.float64))
    gen = torch.Generator().manual_seed(seed)
    Z = torch.randn(lam.numel(), lam.numel(), generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(Z)
    Q = Q * torch.sign(torch.diagonal(R))
    A = (Q * lam) @ Q.T
    return 0.5 * (A + A.T)


def gpt_neo(
    *, vocab: int, hidden: int, layers: int = 2, heads: int = 2, positions: int = 16, window: int = 4,
    seed: int = 0, dtype=torch.float32,
) -> GPTNeoForCausalLM:
    """A GPT-Neo with alternating global/local attention layers, eager attention, no dropout."""
    attention = [[["global", "local"], layers // 2]] + ([[["global"], 1]] if layers % 2 else [])
    cfg = GPTNeoConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        max_position_embeddings=positions,
        attention_types=attention,
        window_size=window,
        intermediate_size=4 * hidden,
        embed_dropout=0.0,
        attention_dropout=0.0,
        resid_dropout=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    return GPTNeoForCausalLM(cfg).to(dtype).eval()


def tiny_gpt_neo(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8) -> GPTNeoForCausalLM:
    """A 2-layer GPT-Neo (one global, one local attention layer, window 4), moved away from
    its initialisation so every block has non-trivial curvature."""
    model = gpt_neo(vocab=vocab, hidden=hidden, seed=seed, dtype=dtype)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return model


class ShiftedLogits(torch.nn.Module):
    """``x -> logits[:, :-1]`` flattened to ``(B (T−1), V)``, with the LM's parameters: the
    ``criterion(model(x), y)`` interface of PyHessian and curvlinops, ``y = x[:, 1:]``."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, x):
        logits = self.lm(input_ids=x, use_cache=False).logits
        return logits[:, :-1, :].reshape(-1, logits.shape[-1])


def shifted_targets(x: torch.Tensor) -> torch.Tensor:
    """The targets matching :class:`ShiftedLogits`."""
    return x[:, 1:].reshape(-1)


def token_batches(vocab: int = 32, seed: int = 0, shapes=((3, 8), (2, 6))) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, s, generator=gen) for s in shapes]


def reference_loss(model, names, shapes, batches):
    """F_data(flat θ) by functional_call, for the autograd reference Hessian."""
    sizes = [int(np.prod(s)) for s in shapes]
    n_tokens = sum(b.shape[0] * (b.shape[1] - 1) for b in batches)

    def fn(flat):
        params = {n: c.view(s) for n, c, s in zip(names, torch.split(flat, sizes), shapes)}
        total = 0.0
        for x in batches:
            logits = functional_call(model, params, args=(), kwargs={"input_ids": x, "use_cache": False}).logits
            total = total + causal_lm_token_loss(logits, x)
        return total / n_tokens

    return fn
