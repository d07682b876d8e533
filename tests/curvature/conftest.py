"""Shared fixtures for the curvature engine: dense float64 matrices with known spectra
and a tiny GPT-Neo (a couple of thousand parameters) with its exact Hessian."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from villani.curvature import ModelHessian

from .cases import matrix_with_spectrum, reference_loss, tiny_gpt_neo, token_batches


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
