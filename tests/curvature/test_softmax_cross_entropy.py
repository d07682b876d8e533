"""Closed-form cross-entropy derivatives against autograd (gradcheck / gradgradcheck)."""

import torch
import torch.nn.functional as F

from villani.curvature import causal_lm_token_loss
from villani.curvature.operators.softmax_cross_entropy import (
    linear_cross_entropy,
    shifted_token_cross_entropy,
    weighted_cross_entropy,
)


def _data(n=7, d=5, v=11, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=gen, dtype=torch.float64, requires_grad=True)
    W = torch.randn(v, d, generator=gen, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, v, (n,), generator=gen)
    w = torch.rand(n, generator=gen, dtype=torch.float64)
    return h, W, y, w


def _reference(h, W, y, w):
    return (F.cross_entropy(h @ W.T, y, reduction="none") * w).sum()


def test_linear_cross_entropy_value_and_derivatives():
    h, W, y, w = _data()
    ws = {}
    fn = lambda h, W: linear_cross_entropy(h, W, y, w, ws)  # noqa: E731
    assert torch.allclose(fn(h, W), _reference(h, W, y, w), rtol=1e-13)
    assert torch.autograd.gradcheck(fn, (h, W))
    assert torch.autograd.gradgradcheck(fn, (h, W))


def test_linear_cross_entropy_hvp_equals_autograd_with_reused_workspace():
    ws = {}
    for n in (9, 4, 9):  # different batch sizes share (a view of) one buffer
        h, W, y, w = _data(n=n, seed=n)
        v_h, v_W = torch.randn_like(h), torch.randn_like(W)
        for fn in (lambda h, W: linear_cross_entropy(h, W, y, w, ws), lambda h, W: _reference(h, W, y, w)):
            gh, gW = torch.autograd.grad(fn(h, W), (h, W), create_graph=True)
            hv = torch.autograd.grad((gh * v_h).sum() + (gW * v_W).sum(), (h, W))
            if fn.__code__.co_names[0] == "linear_cross_entropy":
                ours = hv
            else:
                ref = hv
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_linear_cross_entropy_one_sided_cotangents():
    """Products where only ∂h or only ∂W receives a cotangent (a or b is None)."""
    h, W, y, w = _data()
    for pick in (0, 1):
        g_ours = torch.autograd.grad(linear_cross_entropy(h, W, y, w), (h, W), create_graph=True)[pick]
        g_ref = torch.autograd.grad(_reference(h, W, y, w), (h, W), create_graph=True)[pick]
        u = torch.randn_like(g_ref)
        for a, b in zip(torch.autograd.grad((g_ours * u).sum(), (h, W)), torch.autograd.grad((g_ref * u).sum(), (h, W))):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_weighted_cross_entropy_derivatives():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(3, 4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 6, (3, 4), generator=gen)
    w = torch.rand(3, 4, generator=gen, dtype=torch.float64)
    fn = lambda z: weighted_cross_entropy(z, y, w)  # noqa: E731
    ref = (F.cross_entropy(z.reshape(-1, 6), y.reshape(-1), reduction="none") * w.reshape(-1)).sum()
    assert torch.allclose(fn(z), ref, rtol=1e-13)
    assert torch.autograd.gradcheck(fn, (z,))
    assert torch.autograd.gradgradcheck(fn, (z,))


def test_shifted_token_cross_entropy_matches_sliced_loss():
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 5, 7, generator=gen, dtype=torch.float64)
    x = torch.randint(0, 7, (2, 5), generator=gen)
    torch.testing.assert_close(shifted_token_cross_entropy(logits, x, 0.25), 0.25 * causal_lm_token_loss(logits, x))


def test_large_logits_are_stable():
    z = torch.tensor([[1000.0, 0.0, -1000.0]], dtype=torch.float64, requires_grad=True)
    loss = weighted_cross_entropy(z, torch.tensor([1]), torch.ones(1, dtype=torch.float64))
    assert torch.isfinite(loss) and float(loss) == 1000.0
    (g,) = torch.autograd.grad(loss, z)
    assert torch.isfinite(g).all()
