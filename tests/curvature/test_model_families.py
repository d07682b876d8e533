"""ModelHessian on every supported causal-LM family against exact float64 autograd references.

Families (tiny configs in ``cases.py``): GPT-Neo, GPT-2 (fused ``c_attn``, Conv1D), GPT-NeoX
(partial rotary, fused ``query_key_value``, parallel residual, untied head), Llama untied
(RMSNorm, rotary, SwiGLU) and Llama tied with grouped-query attention (4 query heads, 1
key/value head). References: ``torch.autograd.functional.hessian`` of the same token loss
by ``functional_call`` (dense, d ≈ 1–2k), its gradient, and its diagonal blocks.

Tolerances: GPT-2 runs entirely in float64 (observed 2e-15); GPT-Neo computes attention
scores in float32, NeoX and Llama the attention softmax, Llama also RMSNorm — even in a
float64 model — so their reference carries ~1e-7 relative float32 rounding (symmetrised):
1e-6 there.
"""

import numpy as np
import pytest
import torch

from villani.curvature import ModelHessian, hutchinson
from villani.curvature.operators.causal_lm_loss import choose_loss_path
from villani.curvature.probes import rademacher_rows

from .cases import (
    FAMILIES,
    reference_loss,
    tiny_causal_lm,
    tiny_cohere,
    tiny_gptj,
    token_batches,
)

METHODS = ("double_backward", "fwd_over_rev")
TOL = {"gpt2": 1e-12}  # others: 1e-6 (float32 inside the float64 model, see module doc)


def _tol(family: str) -> float:
    return TOL.get(family, 1e-6)


def _rel(a, b) -> float:
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


@pytest.fixture(scope="module", params=list(FAMILIES))
def family_case(request):
    """(family, model, batches, names, θ, reference loss, dense float64 Hessian of L)."""
    family = request.param
    model = tiny_causal_lm(family)
    batches = token_batches()
    op = ModelHessian(model, batches)
    params = dict(model.named_parameters())
    fn = reference_loss(model, op.names, [params[n].shape for n in op.names], batches)
    theta = op.flat_params()
    hess = torch.autograd.functional.hessian(fn, theta, vectorize=True).detach()
    return {"family": family, "model": model, "batches": batches, "names": op.names, "theta": theta, "fn": fn,
            "hessian": 0.5 * (hess + hess.T), "blocks": op.param_blocks()}


def test_families_are_what_they_claim():
    llama = tiny_causal_lm("llama_tied_gqa")
    assert llama.config.model_type == "llama" and llama.config.num_key_value_heads < llama.config.num_attention_heads
    assert llama.lm_head.weight is llama.model.embed_tokens.weight
    untied = tiny_causal_lm("llama")
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight
    assert tiny_causal_lm("gpt_neox").config.model_type == "gpt_neox"
    assert tiny_causal_lm("gpt2").config.model_type == "gpt2"
    with pytest.raises(ValueError, match="family must be one of"):
        tiny_causal_lm("bert")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_hvp_equals_autograd_hessian(family_case, method):
    case = family_case
    lam = 0.3
    op = ModelHessian(case["model"], case["batches"], lam=lam, method=method)
    H = case["hessian"] + lam * torch.eye(op.dim, dtype=torch.float64)
    V = torch.randn(3, op.dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert _rel(op.matvec(V[0]), H @ V[0]) < _tol(case["family"])
    assert _rel(op.matmat(V), V @ H) < _tol(case["family"])
    assert op.loss_path == ("fused_head" if method == "double_backward" else "autograd")


@pytest.mark.parametrize("method", METHODS)
def test_loss_and_gradient_equal_autograd(family_case, method):
    case = family_case
    op = ModelHessian(case["model"], case["batches"], method=method)
    theta = case["theta"].clone().requires_grad_(True)
    loss = case["fn"](theta)
    (g,) = torch.autograd.grad(loss, theta)
    assert op.data_loss() == pytest.approx(float(loss.detach()), rel=1e-12)
    assert _rel(op.data_grad(), g) < 1e-10


@pytest.mark.parametrize("method", METHODS)
def test_block_samples_are_the_exact_block_quadratic_forms(family_case, method):
    """For each probe v and parameter tensor b, the block sample is v_bᵀ(Hv)_b of the dense H."""
    case = family_case
    op = ModelHessian(case["model"], case["batches"], method=method)
    est = hutchinson(op, 6, seed=1, blocks=op.param_blocks())
    V = rademacher_rows(6, op.dim, seed=1)  # the probes hutchinson drew
    HV = V @ case["hessian"]
    exact = np.stack([(V[:, sl] * HV[:, sl]).sum(dim=1).numpy() for sl in op.param_blocks().values()], axis=1)
    scale = np.abs(exact).max()
    np.testing.assert_allclose(est.block_samples, exact, atol=10 * _tol(case["family"]) * scale)
    np.testing.assert_allclose(est.block_samples.sum(axis=1), est.samples, rtol=1e-10)
    assert est.block_names == tuple(case["names"])


def test_block_traces_unbiased_for_exact_diagonal_block_traces(family_case):
    """Over 96 probes every per-tensor trace, and the total, is within 4 standard errors of
    the exact diagonal-block trace tr H_bb of the dense Hessian."""
    case = family_case
    op = ModelHessian(case["model"], case["batches"])
    est = hutchinson(op, 96, seed=2, blocks=op.param_blocks(), batch_size=8)
    diag = torch.diagonal(case["hessian"])
    for j, (name, sl) in enumerate(op.param_blocks().items()):
        exact = float(diag[sl].sum())
        col = est.block_samples[:, j]
        se = col.std(ddof=1) / np.sqrt(col.size)
        assert abs(col.mean() - exact) <= 4 * se + 1e-9 * max(1.0, abs(exact)), (case["family"], name, col.mean(), exact, se)
    assert abs(est.mean - float(diag.sum())) <= 4 * est.stderr


def test_float32_model_agrees_with_float64(family_case):
    """The same θ in float32: products within float32 accuracy of the float64 ones."""
    case = family_case
    model32 = tiny_causal_lm(case["family"]).float()
    op = ModelHessian(model32, case["batches"])
    assert op.dtype == torch.float32 and op.names == case["names"]
    assert _rel(op.flat_params().double(), case["theta"]) < 1e-7
    v = torch.randn(op.dim, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert _rel(op.matvec(v.float()).double(), case["hessian"] @ v) < 1e-4
    assert op.loss_path == "fused_head"


@pytest.mark.parametrize("build, why", [(tiny_gptj, "biased output layer"), (tiny_cohere, "scaled logits")],
                         ids=["gptj", "cohere"])
def test_fused_head_refused_where_it_would_be_wrong(build, why):
    """A head with a bias, or logits post-processed after a bias-free head, falls back to
    the closed form on the logits — and the products stay exact."""
    model = build()
    batches = token_batches()
    assert choose_loss_path(model, batches[0], "closed_form") == "logits_closed_form", why
    closed = ModelHessian(model, batches)
    plain = ModelHessian(model, batches, cross_entropy="autograd")
    V = torch.randn(2, closed.dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert _rel(closed.matmat(V), plain.matmat(V)) < 1e-10
    assert closed.loss_path == "logits_closed_form" and plain.loss_path == "autograd"
