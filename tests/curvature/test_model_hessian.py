"""ModelHessian against the exact float64 Hessian of a tiny GPT-Neo (autograd reference)."""

import numpy as np
import pytest
import torch

from villani.curvature import ModelHessian, hutchinson, top_eigenvalues

from .cases import tiny_gpt_neo, token_batches

METHODS = ("double_backward", "fwd_over_rev")
# (method, cross_entropy, forced loss path or None)
VARIANTS = [
    ("double_backward", "closed_form", None),  # GPT-Neo: fused output layer + CE
    ("double_backward", "closed_form", "logits_closed_form"),
    ("double_backward", "autograd", None),
    ("fwd_over_rev", "autograd", None),
]
VARIANT_IDS = ["fused_head", "logits_closed_form", "autograd_ce", "fwd_over_rev"]


def _rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def _reg_hessian(theta, lam, mask=None):
    """Autograd Hessian of (λ/2)‖m⊙θ‖² — F's Hessian is the data Hessian plus this."""
    m = torch.ones_like(theta) if mask is None else mask
    return torch.autograd.functional.hessian(lambda t: 0.5 * lam * (m * t).square().sum(), theta)


@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("lam", [0.0, 0.37])
def test_matvec_equals_exact_hessian(tiny_model_case, variant, lam):
    case = tiny_model_case
    method, cross_entropy, forced = variant
    op = ModelHessian(case["model"], case["batches"], lam=lam, method=method, cross_entropy=cross_entropy)
    if forced is not None:
        op.loss_path = forced
    H = case["hessian"] + _reg_hessian(case["theta"], lam)
    gen = torch.Generator().manual_seed(0)
    V = torch.randn(3, op.dim, generator=gen, dtype=torch.float64)
    for v in V:
        assert _rel(op.matvec(v), H @ v) < 1e-6
    assert _rel(op.matmat(V), V @ H) < 1e-6
    expected_path = forced or ("fused_head" if cross_entropy == "closed_form" else "autograd")
    assert op.loss_path == expected_path


def test_decay_mask_restricts_the_regulariser(tiny_model_case):
    case = tiny_model_case
    decayed = [n for n in case["names"] if n.endswith("weight") and "ln" not in n]
    op = ModelHessian(case["model"], case["batches"], lam=0.5, decay=decayed)
    mask = op.decay_mask()
    assert 0 < int(mask.sum()) < op.dim and op.decay_names == decayed
    H = case["hessian"] + _reg_hessian(case["theta"], 0.5, mask)
    v = torch.randn(op.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert _rel(op.matvec(v), H @ v) < 1e-6
    theta = op.flat_params()
    assert op.loss() == pytest.approx(op.data_loss() + 0.25 * float((mask * theta).square().sum()), rel=1e-12)
    by_predicate = ModelHessian(case["model"], case["batches"], lam=0.5, decay=lambda n, p: n in decayed)
    assert torch.equal(by_predicate.decay_mask(), mask)
    with pytest.raises(ValueError, match="not among"):
        ModelHessian(case["model"], case["batches"], decay=["no.such.param"])


@pytest.mark.parametrize("method", METHODS)
def test_loss_and_grad_equal_autograd(tiny_model_case, method):
    case = tiny_model_case
    lam = 0.2
    op = ModelHessian(case["model"], case["batches"], lam=lam, method=method)
    theta = case["theta"].clone().requires_grad_(True)
    F = case["fn"](theta) + 0.5 * lam * theta.square().sum()
    (g,) = torch.autograd.grad(F, theta)
    assert op.loss() == pytest.approx(float(F.detach()), rel=1e-12)
    assert _rel(op.grad(), g) < 1e-10
    assert _rel(op.data_grad() + lam * theta.detach(), g) < 1e-10
    assert op.theta_sq_norm() == pytest.approx(float(theta.detach().square().sum()), rel=1e-12)


def test_token_weighting_matches_hf_loss_per_batch(tiny_model_case):
    """L is the mean over all predicted tokens: HF per-batch means weighted by token counts."""
    case = tiny_model_case
    batches = case["batches"]
    assert batches[0].shape != batches[1].shape
    op = ModelHessian(case["model"], batches)
    with torch.no_grad():
        hf = [float(case["model"](input_ids=x, labels=x).loss) for x in batches]
    counts = [x.shape[0] * (x.shape[1] - 1) for x in batches]
    expected = sum(l * c for l, c in zip(hf, counts)) / sum(counts)
    assert op.num_tokens == sum(counts)
    assert op.data_loss() == pytest.approx(expected, rel=1e-6)  # HF's loss upcasts to float32
    assert op.data_loss() != pytest.approx(float(np.mean(hf)), rel=1e-6)  # not the unweighted mean


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_exact_trace_inside_hutchinson_ci(tiny_model_case):
    """Over 8 fixed seeds × 64 probes the 95% CIs cover the exact trace (≥ 6 of 8: a
    correct estimator fails this with probability < 1%), and so does the pooled CI."""
    case = tiny_model_case
    op = ModelHessian(case["model"], case["batches"], lam=0.1)
    exact = float(torch.trace(case["hessian"])) + 0.1 * op.dim
    runs = [hutchinson(op, 64, seed=s, blocks=op.param_blocks()) for s in range(8)]
    covered = [r.ci95[0] <= exact <= r.ci95[1] for r in runs]
    assert sum(covered) >= 6, [(r.ci95, exact) for r in runs]
    pooled = np.concatenate([r.samples for r in runs])
    half = 1.97 * pooled.std(ddof=1) / np.sqrt(pooled.size)
    assert abs(pooled.mean() - exact) <= half, (pooled.mean(), exact, half)
    # per-tensor traces from the same probes agree with the exact block traces
    block_samples = np.concatenate([r.block_samples for r in runs])
    for j, (name, sl) in enumerate(op.param_blocks().items()):
        block_exact = float(torch.diagonal(case["hessian"])[sl].sum()) + 0.1 * (sl.stop - sl.start)
        col = block_samples[:, j]
        se = col.std(ddof=1) / np.sqrt(col.size)
        assert abs(col.mean() - block_exact) <= 4 * se + 1e-9, name
    assert runs[0].block_names == tuple(op.names)


def test_top_eigenvalues_of_model_hessian(tiny_model_case):
    case = tiny_model_case
    op = ModelHessian(case["model"], case["batches"])
    exact = torch.linalg.eigvalsh(case["hessian"]).flip(0)[:3].numpy()
    res = top_eigenvalues(op, 3, num_steps=60, seed=0)
    assert np.all(res.residuals < 1e-8)
    # the reference carries GPT-Neo's float32 attention rounding (~1e-7 entrywise)
    np.testing.assert_allclose(res.values, exact, rtol=1e-6)


def test_param_blocks_partition_and_tied_embeddings(tiny_model_case):
    case = tiny_model_case
    model = case["model"]
    op = ModelHessian(model, case["batches"])
    assert model.lm_head.weight is model.transformer.wte.weight
    assert "lm_head.weight" not in op.names and "transformer.wte.weight" in op.names
    unique = {id(p): p.numel() for p in model.parameters()}
    assert op.dim == sum(unique.values())
    blocks = list(op.param_blocks().values())
    assert blocks[0].start == 0 and blocks[-1].stop == op.dim
    assert all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))
    flat = op.flat_params()
    for (name, p), sl in zip(model.named_parameters(), blocks):
        assert torch.equal(flat[sl], p.detach().reshape(-1)), name


def test_graph_reuse_and_recompute_agree(tiny_model_case):
    case = tiny_model_case
    v = torch.randn(2, case["theta"].numel(), generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    reuse = ModelHessian(case["model"], case["batches"], reuse_graph=True)
    fresh = ModelHessian(case["model"], case["batches"], reuse_graph=False)
    assert _rel(fresh.matmat(v), reuse.matmat(v)) < 1e-12
    assert fresh.data_loss() == pytest.approx(reuse.data_loss(), rel=1e-14)
    reuse.release()
    assert _rel(reuse.matvec(v[0]), fresh.matvec(v[0])) < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_bitwise_reproducible(tiny_model_case, method):
    case = tiny_model_case
    a = hutchinson(ModelHessian(case["model"], case["batches"], method=method), 4, seed=3)
    b = hutchinson(ModelHessian(case["model"], case["batches"], method=method), 4, seed=3)
    assert a.samples.tolist() == b.samples.tolist()


def test_float32_model_runs_in_float32():
    model = tiny_gpt_neo(dtype=torch.float32)
    op = ModelHessian(model, token_batches(shapes=((2, 8),)))
    assert op.dtype == torch.float32
    hv = op.matvec(torch.ones(op.dim, dtype=torch.float64))
    assert hv.dtype == torch.float32 and torch.isfinite(hv).all()


def test_rejects_non_eager_attention_and_bad_dtype():
    model = tiny_gpt_neo()
    model.config._attn_implementation = "sdpa"
    with pytest.raises(ValueError, match="eager"):
        ModelHessian(model, token_batches())
    with pytest.raises(ValueError, match="float32 or all float64"):
        ModelHessian(tiny_gpt_neo().to(torch.bfloat16), token_batches())
    with pytest.raises(ValueError, match="method"):
        ModelHessian(tiny_gpt_neo(), token_batches(), method="finite_difference")
    with pytest.raises(ValueError, match="T≥2"):
        ModelHessian(tiny_gpt_neo(), [torch.zeros(3, 1, dtype=torch.long)])


def test_eval_mode_and_stale_parameters_detected():
    model = tiny_gpt_neo()
    model.train()
    op = ModelHessian(model, token_batches())
    assert not model.training
    op.matvec(torch.ones(op.dim, dtype=torch.float64))
    with torch.no_grad():
        model.transformer.ln_f.weight.add_(1.0)
    with pytest.raises(RuntimeError, match="changed"):
        op.matvec(torch.ones(op.dim, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        ModelHessian(model, token_batches()).matvec(torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("method", METHODS)
def test_vectorized_blocks_equal_exact_hessian(tiny_model_case, method):
    case = tiny_model_case
    op = ModelHessian(case["model"], case["batches"], method=method, vectorize=True)
    V = torch.randn(3, op.dim, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert _rel(op.matmat(V), V @ case["hessian"]) < 1e-6
    fresh = ModelHessian(case["model"], case["batches"], vectorize=True, reuse_graph=False)
    assert _rel(fresh.matmat(V), V @ case["hessian"]) < 1e-6


def test_builds_counted_and_loss_path_checked_once_per_model():
    """Graph kept: one forward + first backward per batch, whatever the number of products;
    rebuilt: one per batch per product. The fused-head check runs the whole model once per
    model object, not once per operator."""
    model, batches = tiny_gpt_neo(), token_batches()
    calls = []
    hook = model.register_forward_hook(lambda *_: calls.append(1))  # the check's full forward
    try:
        v = torch.randn(2, sum(p.numel() for p in model.parameters()), dtype=torch.float64,
                        generator=torch.Generator().manual_seed(5))
        kept = ModelHessian(model, batches)
        kept.matmat(v), kept.matvec(v[0]), kept.data_grad()
        assert kept.builds == len(batches) and kept.build_seconds > 0 and kept.loss_path == "fused_head"
        rebuilt = ModelHessian(model, batches, reuse_graph=False)
        rebuilt.matvec(v[0]), rebuilt.matvec(v[1])
        assert rebuilt.builds == 2 * len(batches) and rebuilt.loss_path == "fused_head"
        rebuilt.data_loss()
        assert rebuilt.builds == 3 * len(batches)  # the first-order pass, without graph
        assert len(calls) == 1, "the fused-head check runs the model exactly once per model"
    finally:
        hook.remove()


def test_products_leave_parameter_grads_as_they_were(tiny_model_case):
    """The products accumulate into the output through the parameters' .grad and restore it."""
    case = tiny_model_case
    params = [p for p in case["model"].parameters()]
    marker = torch.full_like(params[0], 7.0)
    params[0].grad = marker
    try:
        op = ModelHessian(case["model"], case["batches"])
        op.matvec(torch.ones(op.dim, dtype=torch.float64))
        assert params[0].grad is marker and bool((marker == 7.0).all())
        assert all(p.grad is None for p in params[1:])
    finally:
        params[0].grad = None


def test_a_parameter_the_loss_does_not_use_gets_zero_rows(tiny_model_case):
    case = tiny_model_case
    model = tiny_gpt_neo()
    model.register_parameter("unused", torch.nn.Parameter(torch.ones(5, dtype=torch.float64)))
    for reuse in (True, False):
        op = ModelHessian(model, case["batches"], reuse_graph=reuse)
        unused = op.param_blocks()["unused"]
        rest = torch.ones(op.dim, dtype=torch.bool)
        rest[unused] = False
        v = torch.randn(2, op.dim, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
        HV = op.matmat(v)
        assert torch.equal(HV[:, unused], torch.zeros(2, 5, dtype=torch.float64))
        assert _rel(HV[:, rest], v[:, rest] @ case["hessian"]) < 1e-6
        assert torch.equal(op.data_grad()[unused], torch.zeros(5, dtype=torch.float64))
