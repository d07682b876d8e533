"""ModelHessian at measure.precision: "highest" is today's fp32 product, "tf32" changes nothing
on the CPU, "bf16" (autocast) adds a finite, non-zero error — the same on every loss path,
the fused output layer's own rounding included."""

import pytest
import torch

from villani.curvature import ModelHessian
from villani.curvature.operators.precision import check_precision, effective_precision, product_precision

from .cases import tiny_gpt_neo

# (cross_entropy, forced loss path or None, method): every path a product can take
PATHS = [("closed_form", None, "double_backward"), ("closed_form", "logits_closed_form", "double_backward"),
         ("autograd", None, "double_backward"), ("autograd", None, "fwd_over_rev")]


@pytest.fixture(scope="module")
def case():
    model = tiny_gpt_neo(dtype=torch.float32, vocab=64, hidden=16)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, 64, (3, 12), generator=gen) for _ in range(2)]
    dim = sum(p.numel() for p in model.parameters() if p.requires_grad)
    V = torch.randint(0, 2, (3, dim), generator=gen).float() * 2 - 1
    return model, batches, V


def _products(case, precision, ce="closed_form", forced=None, method="double_backward", **kw):
    model, batches, V = case
    op = ModelHessian(model, batches, cross_entropy=ce, method=method, precision=precision, **kw)
    if forced is not None:
        op.loss_path = forced
    return op.matmat(V), op


def test_highest_is_the_default_and_tf32_is_highest_on_the_cpu(case):
    default, _ = _products(case, "highest")
    model, batches, V = case
    assert torch.equal(ModelHessian(model, batches).matmat(V), default)
    tf32, op = _products(case, "tf32")
    assert effective_precision("tf32", "cpu") == "highest" and op.precision == "tf32"
    assert torch.equal(tf32, default)
    assert torch.get_float32_matmul_precision() == "highest"  # restored after the products


@pytest.mark.parametrize("path", PATHS, ids=["fused_head", "logits_closed_form", "autograd_ce", "fwd_over_rev"])
def test_bf16_adds_a_finite_nonzero_error_on_every_path(case, path):
    ce, forced, method = path
    ref, _ = _products(case, "highest", ce, forced, method)
    low, op = _products(case, "bf16", ce, forced, method)
    assert low.dtype == torch.float32 and op.loss_path == (forced or ("fused_head" if ce == "closed_form" else
                                                                      "autograd"))
    rel = (low - ref).norm(dim=1) / ref.norm(dim=1)
    assert torch.isfinite(rel).all() and (rel > 1e-4).all() and (rel < 1.0).all()
    # the closed forms round like autocast does: their bf16 error is autograd's under autocast
    # (forward-over-reverse rounds other intermediate products: the same size only)
    auto, _ = _products(case, "bf16", "autograd")
    assert torch.allclose(rel, (auto - ref).norm(dim=1) / ref.norm(dim=1), rtol=0.1 if method == "double_backward"
                          else 0.5)


def test_bf16_without_a_kept_graph_is_the_same_product(case):
    ref, _ = _products(case, "highest")
    kept, _ = _products(case, "bf16")
    rebuilt, op = _products(case, "bf16", reuse_graph=False)
    # per batch, the rounding differs a little: far less than what bf16 adds
    assert not op.graph_kept
    assert ((rebuilt - kept).norm(dim=1) < 0.1 * (kept - ref).norm(dim=1)).all()


def test_a_precision_that_does_not_exist_is_one_line():
    with pytest.raises(ValueError, match=r"^precision: 'fp16' is invalid \(allowed: highest, tf32, bf16\)$"):
        check_precision("fp16")
    with pytest.raises(ValueError, match="precision: 'fp8'"):
        ModelHessian(tiny_gpt_neo(dtype=torch.float32), [torch.zeros(1, 4, dtype=torch.long)], precision="fp8")
    with pytest.raises(ValueError, match="precision: 'half'"):
        with product_precision("half", "cpu"):
            pass
