"""Shared fixtures for the curvature engine: dense float64 matrices with known spectra
and a tiny GPT-Neo (a couple of thousand parameters) with its exact Hessian."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call
from transformers import GPTNeoConfig, GPTNeoForCausalLM

from villani.curvature import ModelHessian, causal_lm_token_loss


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny problems are overhead-bound; one intra-op thread avoids oversubscribing the
    (shared, 2-core) CI machine. Restored after each test."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def matrix_with_spectrum(eigenvalues, seed: int) -> torch.Tensor:
    """Q diag(λ) Qᵀ in float64 with a Haar-random orthogonal Q fixed by ``seed``."""
    lam = torch.as_tensor(np.asarray(eigenvalues, dtype=np.float64))
    gen = torch.Generator().manual_seed(seed)
    Z = torch.randn(lam.numel(), lam.numel(), generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(Z)
    Q = Q * torch.sign(torch.diagonal(R))
    A = (Q * lam) @ Q.T
    return 0.5 * (A + A.T)


@pytest.fixture(scope="session")
def separated():
    """dim 300: ten well-separated top eigenvalues 100, 95, …, 55 over a bulk in [-1, 1]."""
    top = 100.0 - 5.0 * np.arange(10)
    bulk = np.linspace(-1.0, 1.0, 290)
    eig = np.concatenate([top, bulk])
    return matrix_with_spectrum(eig, seed=1), np.sort(eig)[::-1]


@pytest.fixture(scope="session")
def general_matrix():
    """dim 60: an indefinite symmetric matrix with a sizeable diagonal and off-diagonal."""
    gen = torch.Generator().manual_seed(2)
    B = torch.randn(60, 60, generator=gen, dtype=torch.float64)
    return 0.5 * (B + B.T) + torch.diag(torch.linspace(0.0, 6.0, 60, dtype=torch.float64))


@pytest.fixture(scope="session")
def low_rank_plus_noise():
    """dim 400: rank-15 part with eigenvalues 1000 … 100 plus a small symmetric noise."""
    gen = torch.Generator().manual_seed(3)
    U, _ = torch.linalg.qr(torch.randn(400, 15, generator=gen, dtype=torch.float64))
    L = (U * torch.linspace(1000.0, 100.0, 15, dtype=torch.float64)) @ U.T
    N = torch.randn(400, 400, generator=gen, dtype=torch.float64)
    return L + 0.05 * (N + N.T)


def tiny_gpt_neo(dtype=torch.float64, seed: int = 0, vocab: int = 32, hidden: int = 8) -> GPTNeoForCausalLM:
    """A 2-layer GPT-Neo (one global, one local attention layer, window 4), eager, no dropout."""
    cfg = GPTNeoConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=2,
        num_heads=2,
        max_position_embeddings=16,
        attention_types=[[["global", "local"], 1]],
        window_size=4,
        intermediate_size=4 * hidden,
        embed_dropout=0.0,
        attention_dropout=0.0,
        resid_dropout=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = GPTNeoForCausalLM(cfg).to(dtype)
    # move away from the initialisation so every block has non-trivial curvature
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed + 1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=dtype))
    return model.eval()


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


@pytest.fixture(scope="session")
def tiny_model_case():
    """Model, batches of different sizes, and the exact float64 Hessian of the data loss."""
    model = tiny_gpt_neo()
    batches = token_batches()
    op = ModelHessian(model, batches)
    shapes = [p.shape for _, p in model.named_parameters()]
    fn = reference_loss(model, op.names, shapes, batches)
    theta = op.flat_params()
    hess = torch.autograd.functional.hessian(fn, theta, vectorize=True).detach()
    # GPT-Neo's eager attention computes QKᵀ in float32 even in a float64 model, so the
    # reference is float64 except for ~1e-7 relative rounding in attention entries
    # (visible as a 1e-7 asymmetry); symmetrise it.
    hess = 0.5 * (hess + hess.T)
    return {"model": model, "batches": batches, "fn": fn, "theta": theta, "hessian": hess, "names": op.names}
