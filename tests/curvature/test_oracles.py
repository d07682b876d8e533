"""Cross-checks against PyHessian and curvlinops on the same model, batches and probes.

Both libraries see the causal LM through a wrapper that returns the shifted logits
``(B (T−1), V)`` and a ``CrossEntropyLoss`` on ``input_ids[:, 1:]``. They weight batches
by sequences (``B / ΣB``); with equal sequence length ``T`` that is our token weighting.
Everything here is float32, so agreement is to float32 precision.

curvlinops 3.0.1 computes Hessian products as ``jvp(jacrev(loss))``; under torch 2.13 the
rows of LayerNorm *weights* come out wrong (forward-mode AD of the layer-norm backward
under ``vmap``; cf. pytorch/pytorch#196700, the same happens with ``torch.func.hessian``).
Our two methods, PyHessian (double backward) and the autograd reference all agree, so
curvlinops is compared on every other row, and the discrepancy itself is pinned by a
strict xfail that starts failing once upstream fixes it.
"""

import copy

import numpy as np
import pytest
import torch
from curvlinops import HessianLinearOperator
from pyhessian import hessian as PyHessian
from pyhessian.utils import hessian_vector_product
from scipy.sparse.linalg import LinearOperator as ScipyOperator
from scipy.sparse.linalg import eigsh

from villani.curvature import ModelHessian, as_operator, hutchinson, top_eigenvalues
from villani.curvature.probes import rademacher_rows

from .cases import ShiftedLogits, shifted_targets, tiny_gpt_neo, token_batches

pytestmark = pytest.mark.oracle

VOCAB = 48


@pytest.fixture(scope="module")
def case():
    model = tiny_gpt_neo(dtype=torch.float32, vocab=VOCAB, hidden=12, seed=3)
    batches = token_batches(vocab=VOCAB, seed=5, shapes=((4, 10), (2, 10)))
    ours = ModelHessian(model, batches)
    probes = rademacher_rows(6, ours.dim, seed=0, dtype=torch.float32)
    return {"model": model, "batches": batches, "ours": ours, "probes": probes}


def _rel(a, b):
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def test_hvp_matches_pyhessian_on_the_same_probes(case):
    model = copy.deepcopy(case["model"])  # PyHessian leaves graph-carrying .grad behind
    x = case["batches"][0]
    ph = PyHessian(ShiftedLogits(model), torch.nn.CrossEntropyLoss(), data=(x, shifted_targets(x)), cuda=False)
    ours = ModelHessian(case["model"], [x])
    sizes = [p.numel() for p in ph.params]
    assert sum(sizes) == ours.dim
    for v in case["probes"]:
        vs = [c.view_as(p) for c, p in zip(torch.split(v, sizes), ph.params)]
        theirs = torch.cat([h.reshape(-1) for h in hessian_vector_product(ph.gradsH, ph.params, vs)])
        assert _rel(ours.matvec(v), theirs) < 1e-5
    # Hutchinson samples on the same probes
    ours_samples = hutchinson(ours, 6, seed=0).samples
    theirs_samples = [
        float(v @ torch.cat([h.reshape(-1) for h in hessian_vector_product(
            ph.gradsH, ph.params, [c.view_as(p) for c, p in zip(torch.split(v, sizes), ph.params)])]))
        for v in case["probes"]
    ]
    np.testing.assert_allclose(ours_samples, theirs_samples, rtol=1e-4)


def test_multi_batch_hvp_and_top_eigenvalue_match_pyhessian(case):
    model = copy.deepcopy(case["model"])
    loader = [(x, shifted_targets(x)) for x in case["batches"]]
    ph = PyHessian(ShiftedLogits(model), torch.nn.CrossEntropyLoss(), dataloader=loader, cuda=False)
    sizes = [p.numel() for p in ph.params]
    v = case["probes"][0]
    _, theirs = ph.dataloader_hv_product([c.view_as(p) for c, p in zip(torch.split(v, sizes), ph.params)])
    assert _rel(case["ours"].matvec(v), torch.cat([h.reshape(-1) for h in theirs])) < 1e-5
    torch.manual_seed(0)
    (lam_ph,), _ = ph.eigenvalues(maxIter=300, tol=1e-6, top_n=1)
    # power iteration finds the largest-magnitude eigenvalue; ours are largest algebraic
    H = case["ours"]
    top = top_eigenvalues(H, 1, num_steps=40, seed=0).values[0]
    bottom = -top_eigenvalues(as_operator(lambda v: -H.matvec(v), H.dim, dtype=H.dtype), 1, num_steps=40).values[0]
    expected = top if abs(top) >= abs(bottom) else bottom
    assert lam_ph == pytest.approx(expected, rel=1e-3)  # power iteration's tolerance


def test_top_eigenvalues_match_arpack_on_pyhessian(case):
    model = copy.deepcopy(case["model"])
    x = case["batches"][0]
    ph = PyHessian(ShiftedLogits(model), torch.nn.CrossEntropyLoss(), data=(x, shifted_targets(x)), cuda=False)
    sizes = [p.numel() for p in ph.params]

    def matvec(v):
        vt = torch.as_tensor(np.asarray(v, dtype=np.float32).ravel())
        vs = [c.view_as(p) for c, p in zip(torch.split(vt, sizes), ph.params)]
        return torch.cat([h.reshape(-1) for h in hessian_vector_product(ph.gradsH, ph.params, vs)]).numpy()

    dim = sum(sizes)
    theirs = eigsh(ScipyOperator((dim, dim), matvec=matvec, dtype=np.float32), k=3, which="LA", tol=1e-6)[0]
    ours = top_eigenvalues(ModelHessian(case["model"], [x]), 3, num_steps=60, seed=0)
    np.testing.assert_allclose(ours.values, np.sort(theirs)[::-1], rtol=1e-4)


@pytest.fixture(scope="module")
def curvlinops_op(case):
    params = [p for p in case["model"].parameters() if p.requires_grad]
    data = [(x, shifted_targets(x)) for x in case["batches"]]
    return HessianLinearOperator(ShiftedLogits(case["model"]), torch.nn.CrossEntropyLoss(), params, data)


def _layernorm_weight_rows(op):
    mask = torch.zeros(op.dim, dtype=torch.bool)
    for name, sl in op.param_blocks().items():
        if ".ln_" in name and name.endswith(".weight"):
            mask[sl] = True
    return mask


def test_hvp_matches_curvlinops_on_the_same_probes(case, curvlinops_op):
    V = case["probes"]
    theirs = (curvlinops_op @ V.T).T
    keep = ~_layernorm_weight_rows(case["ours"])
    assert _rel(case["ours"].matmat(V)[:, keep], theirs[:, keep]) < 1e-5
    fwd = ModelHessian(case["model"], case["batches"], method="fwd_over_rev")
    assert _rel(fwd.matmat(V[:2])[:, keep], theirs[:2, keep]) < 1e-5


@pytest.mark.xfail(strict=True, reason="curvlinops 3.0.1 + torch 2.13: wrong LayerNorm-weight rows (jvp∘jacrev)")
def test_curvlinops_layernorm_weight_rows(case, curvlinops_op):
    V = case["probes"][:2]
    rows = _layernorm_weight_rows(case["ours"])
    ours = case["ours"].matmat(V)[:, rows]
    # ours is right there: PyHessian's double backward agrees on the same rows
    model = copy.deepcopy(case["model"])
    loader = [(x, shifted_targets(x)) for x in case["batches"]]
    ph = PyHessian(ShiftedLogits(model), torch.nn.CrossEntropyLoss(), dataloader=loader, cuda=False)
    sizes = [p.numel() for p in ph.params]
    for v, row in zip(V, ours):
        _, hv = ph.dataloader_hv_product([c.view_as(p) for c, p in zip(torch.split(v, sizes), ph.params)])
        assert _rel(row, torch.cat([h.reshape(-1) for h in hv])[rows]) < 1e-5
    assert _rel((curvlinops_op @ V.T).T[:, rows], ours) < 1e-5


def test_gradient_and_loss_match_curvlinops(case, curvlinops_op):
    grads, loss = curvlinops_op.gradient_and_loss()
    theirs = torch.cat([g.reshape(-1) for g in grads])
    assert _rel(case["ours"].data_grad(), theirs) < 1e-5
    assert case["ours"].data_loss() == pytest.approx(float(loss), rel=1e-5)
