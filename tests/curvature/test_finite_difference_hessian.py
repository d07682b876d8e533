"""FiniteDifferenceHessian on one process: against the exact product, its step rule, and its
bookkeeping (θ restored bitwise, stale parameters detected, the regulariser exact)."""

import math

import pytest
import torch

from villani.curvature import ModelHessian
from villani.curvature.operators.finite_difference_hessian import (
    FiniteDifferenceHessian,
    default_rel_step,
)
from villani.curvature.probes import rademacher_rows

from .cases import tiny_causal_lm, token_batches


def _rel(a, b) -> float:
    return float(torch.linalg.vector_norm(a.double() - b) / torch.linalg.vector_norm(b))


@pytest.fixture(scope="module")
def gpt2_case():
    """GPT-2 computes entirely in its dtype, so float64 finite differences converge to the
    exact product until float64 round-off: a test of the scheme without float32 noise."""
    batches = token_batches()
    exact = ModelHessian(tiny_causal_lm("gpt2"), batches)
    V = rademacher_rows(2, exact.dim, 0)
    return {"batches": batches, "V": V, "HV": exact.matmat(V), "grad": exact.data_grad(), "loss": exact.data_loss()}


def test_float64_central_difference_converges_quadratically(gpt2_case):
    errs = {}
    for h in (1e-4, 1e-5):
        fd = FiniteDifferenceHessian(tiny_causal_lm("gpt2"), gpt2_case["batches"], rel_step=h)
        errs[h] = _rel(fd.matmat(gpt2_case["V"]), gpt2_case["HV"])
    assert errs[1e-5] < 1e-7  # observed 5.9e-8 (κ ≈ 60: κ²h²/6)
    assert 50 < errs[1e-4] / errs[1e-5] < 200  # O(h²): ×100 per decade
    fd = FiniteDifferenceHessian(tiny_causal_lm("gpt2"), gpt2_case["batches"])
    assert fd.rel_step == default_rel_step(torch.float64)
    assert _rel(fd.matvec(gpt2_case["V"][0]), gpt2_case["HV"][0]) < 1e-8  # observed 3e-10
    assert fd.data_loss() == pytest.approx(gpt2_case["loss"], rel=1e-12)
    assert _rel(fd.data_grad(), gpt2_case["grad"]) < 1e-12
    assert fd.gradients == 3  # one for the first-order values, two for the product


def test_float32_default_step_error(gpt2_case):
    fd = FiniteDifferenceHessian(tiny_causal_lm("gpt2").float(), gpt2_case["batches"])
    assert fd.dtype == torch.float32
    assert _rel(fd.matmat(gpt2_case["V"].float()), gpt2_case["HV"]) < 1e-3


def test_bfloat16_vectors_are_float32():
    fd = FiniteDifferenceHessian(tiny_causal_lm("gpt2").to(torch.bfloat16), token_batches())
    hv = fd.matvec(torch.ones(fd.dim))
    assert fd.dtype == torch.float32 and hv.dtype == torch.float32 and torch.isfinite(hv).all()
    assert fd.rel_step == default_rel_step(torch.bfloat16)


def test_step_bounds_the_largest_coordinate_move():
    fd = FiniteDifferenceHessian(tiny_causal_lm("llama"), token_batches(), rel_step=1e-3)
    rms = float(fd.flat_params().norm()) / math.sqrt(fd.dim)
    v = torch.zeros(fd.dim, dtype=torch.float64)
    v[5], v[9] = 0.5, -2.0
    assert fd.step(v) == pytest.approx(1e-3 * rms / 2.0, rel=1e-12)
    assert fd.step(torch.ones(fd.dim, dtype=torch.float64)) == pytest.approx(1e-3 * rms, rel=1e-12)
    assert fd.step(torch.zeros(fd.dim, dtype=torch.float64)) == 0.0


def test_regulariser_and_decay_mask_are_exact(gpt2_case):
    model = tiny_causal_lm("gpt2")
    decayed = [n for n, _ in model.named_parameters() if n.endswith("weight") and ".ln_" not in n]
    fd = FiniteDifferenceHessian(model, gpt2_case["batches"], lam=0.7, decay=decayed)
    exact = ModelHessian(tiny_causal_lm("gpt2"), gpt2_case["batches"], lam=0.7, decay=decayed)
    assert torch.equal(fd.decay_mask(), exact.decay_mask()) and fd.decay_names == exact.decay_names
    v = gpt2_case["V"][1]
    assert _rel(fd.matvec(v), exact.matvec(v)) < 1e-8
    assert fd.loss() == pytest.approx(exact.loss(), rel=1e-12)
    assert _rel(fd.grad(), exact.grad()) < 1e-12
    assert fd.theta_sq_norm() == pytest.approx(exact.theta_sq_norm(), rel=1e-14)
    with pytest.raises(ValueError, match="not among"):
        FiniteDifferenceHessian(model, gpt2_case["batches"], decay=["no.such"])


def test_parameters_restored_bitwise_and_changes_detected():
    model = tiny_causal_lm("gpt_neox").float()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fd = FiniteDifferenceHessian(model, token_batches())
    fd.matvec(torch.ones(fd.dim))
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    with torch.no_grad():
        model.gpt_neox.final_layer_norm.weight.add_(1e-3)
    with pytest.raises(RuntimeError, match="changed"):
        fd.matvec(torch.ones(fd.dim))
    with pytest.raises(ValueError, match="shape"):
        FiniteDifferenceHessian(tiny_causal_lm("gpt_neox"), token_batches()).matvec(torch.ones(3))
    with pytest.raises(ValueError, match="rel_step"):
        FiniteDifferenceHessian(model, token_batches(), rel_step=0.0)
