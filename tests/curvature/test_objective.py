"""F, ∇F and ∇²F from the operator, λ inside: against autograd on a tiny GPT-Neo in float64.

:meth:`HessianOperator.objective` is the one place F = L + (λ/2)‖m⊙θ‖² and ∇F = ∇L + λ m⊙θ
are composed; :meth:`HessianOperator.data_hessian` is ∇²L alone, for numbers about L only.
References: the autograd loss of the case (``fn``), its gradient, and the dense float64
Hessian of the data loss (``tiny_model_case``), plus the penalty's own autograd terms.
"""

import pytest
import torch

from villani.curvature import ModelHessian
from villani.curvature.operators.objective import Objective, regularised_loss

LAM = 0.37


def _rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def _autograd_F(case, lam, mask):
    """(F, ∇F, L, ∇L) of the case at θ by autograd, with (λ/2)‖m⊙θ‖² added there."""
    theta = case["theta"].clone().requires_grad_(True)
    L = case["fn"](theta)
    F = L + 0.5 * lam * (mask * theta).square().sum()
    (gF,) = torch.autograd.grad(F, theta, retain_graph=True)
    (gL,) = torch.autograd.grad(L, theta)
    return float(F.detach()), gF, float(L.detach()), gL


def _decayed(case):
    """A mask that leaves some tensors out (biases, LayerNorm): m is not all ones."""
    return [n for n in case["names"] if n.endswith("weight") and "ln" not in n]


@pytest.mark.parametrize("masked", [False, True], ids=["all_decayed", "weights_only"])
def test_objective_equals_autograd(tiny_model_case, masked):
    case = tiny_model_case
    decay = _decayed(case) if masked else None
    H = ModelHessian(case["model"], case["batches"], lam=LAM, decay=decay)
    mask = H.decay_mask()
    assert masked == (int(mask.sum()) < H.dim)
    F, gF, L, gL = _autograd_F(case, LAM, mask)
    obj = H.objective()
    assert isinstance(obj, Objective) and obj.lam == LAM
    assert obj.F == pytest.approx(F, rel=1e-12) and obj.F == pytest.approx(H.loss(), rel=1e-14)
    assert obj.loss_L == pytest.approx(L, rel=1e-12)
    assert _rel(obj.grad_F, gF) < 1e-10 and _rel(obj.grad_L, gL) < 1e-10
    assert _rel(obj.grad_F, H.grad().double()) < 1e-12
    theta = mask * case["theta"]
    assert obj.theta_sq == pytest.approx(float(theta.square().sum()), rel=1e-13)
    assert obj.grad_F_sq == pytest.approx(float(gF.square().sum()), rel=1e-9)
    assert obj.grad_L_sq == pytest.approx(float(gL.square().sum()), rel=1e-9)
    assert obj.theta_dot_grad_L == pytest.approx(float(theta @ gL), rel=1e-9)
    # the expansion in λ (villani.diagnostics.psi.grad_F_sq) is the same number
    expanded = obj.grad_L_sq + 2 * LAM * obj.theta_dot_grad_L + LAM**2 * obj.theta_sq
    assert obj.grad_F_sq == pytest.approx(expanded, rel=1e-10)


def test_objective_at_another_lam_is_that_operators(tiny_model_case):
    """``objective().at(λ')`` — every λ from one pass — equals the operator built at λ'."""
    case = tiny_model_case
    at_zero = ModelHessian(case["model"], case["batches"], lam=0.0).objective()
    for lam in (0.0, 1e-3, LAM, 5.0):
        direct = ModelHessian(case["model"], case["batches"], lam=lam).objective()
        moved = at_zero.at(lam)
        assert moved.lam == lam and moved.F == pytest.approx(direct.F, rel=1e-14)
        assert moved.grad_F_sq == pytest.approx(direct.grad_F_sq, rel=1e-12)
        F, gF, _, _ = _autograd_F(case, lam, torch.ones_like(case["theta"]))
        assert moved.F == pytest.approx(F, rel=1e-12) and _rel(moved.grad_F, gF) < 1e-10
    assert at_zero.F == at_zero.loss_L and at_zero.grad_F_sq == at_zero.grad_L_sq


@pytest.mark.parametrize("masked", [False, True], ids=["all_decayed", "weights_only"])
def test_hessian_has_lam_inside_and_data_hessian_is_L_alone(tiny_model_case, masked):
    """∇²F v = (∇²L + λ diag(m)) v against the dense float64 Hessian; ∇²L v without λ; the
    view counts its products with the operator's and refuses what belongs to F."""
    case = tiny_model_case
    H = ModelHessian(case["model"], case["batches"], lam=LAM, decay=_decayed(case) if masked else None)
    mask = H.decay_mask()
    hess_F = case["hessian"] + LAM * torch.diag(mask)
    hessian_L = H.data_hessian()
    V = torch.randn(3, H.dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert _rel(H.matmat(V), V @ hess_F) < 1e-6
    assert _rel(hessian_L.matmat(V), V @ case["hessian"]) < 1e-6
    assert _rel(hessian_L.matvec(V[0]), case["hessian"] @ V[0]) < 1e-6
    assert _rel(H.matvec(V[0]) - hessian_L.matvec(V[0]), LAM * mask * V[0]) < 1e-12
    assert H.products == 3 + 3 + 1 + 2
    assert (hessian_L.dim, hessian_L.vectors, hessian_L.param_blocks()) == (H.dim, H.vectors, H.param_blocks())
    for name in ("lam", "loss", "grad", "objective"):
        with pytest.raises(AttributeError, match="belongs to F"):
            getattr(hessian_L, name)


def test_regularised_loss_keeps_a_graph():
    """The one formula of F serves plain numbers and tensors that are differentiated (training's coupled L2)."""
    assert regularised_loss(2.0, 10.0, 0.1) == 2.0 + 0.5 * 0.1 * 10.0
    w = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    F = regularised_loss(torch.tensor(1.0, dtype=torch.float64), w.square().sum(), 0.2)
    (g,) = torch.autograd.grad(F, w)
    assert float(F.detach()) == pytest.approx(1.0 + 0.1 * 25.0) and torch.allclose(g, 0.2 * w.detach())
