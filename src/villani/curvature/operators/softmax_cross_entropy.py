r"""Next-token cross-entropy with closed-form first and second derivatives.

For logits :math:`z_n\in\mathbb R^V`, softmax :math:`p_n`, target :math:`y_n` and token
weight :math:`w_n`,

.. math::
    \ell = \sum_n w_n\big(\operatorname{lse}(z_n) - z_{n,y_n}\big),\qquad
    \nabla_{z_n}\ell = w_n(p_n - e_{y_n}) =: G_n,\qquad
    \nabla^2_{z_n}\ell\,\bar G_n = w_n\, p_n\odot\big(\bar G_n - \langle p_n,\bar G_n\rangle\big).

Autograd's double backward through ``log_softmax`` + ``nll_loss`` keeps several
``(N, V)`` tensors alive (logits, log-probabilities, the scattered one-hot gradient, the
recomputed ``exp``) and allocates a fresh ``(N, V)`` tensor for most of its dozen
elementwise passes per Hessian-vector product. On CPU every fresh tensor of more than
32 MB is a new ``mmap`` that page-faults in; on GPU it is memory traffic. The vocabulary
is the time and memory hot spot of a language model's Hessian, so it is written out here.

Two forms:

- :func:`weighted_cross_entropy` on given logits (any model).
- :func:`linear_cross_entropy` fuses the output layer :math:`z = hW^\top` (no bias) with
  the loss. Its gradient node outputs :math:`(\partial_h, \partial_W) = (GW, G^\top h)`;
  for cotangents :math:`(a, b)` of those, the second-order pass is

  .. math::
      \bar G = aW^\top + hb^\top,\quad
      \bar z = \nabla^2_z\ell\,\bar G,\quad
      \bar h = \bar zW + Gb,\quad
      \bar W = \bar z^\top h + G^\top a,

  with :math:`Gb` and :math:`G^\top a` formed from :math:`p` without materialising
  :math:`G`. That is six ``N×D×V`` matmuls (the minimum for an exact product) and a
  single ``(N, V)`` work buffer, reused across products and batches; the graph keeps
  one ``(N, V)`` tensor per batch, :math:`p`.

Both run with autocast off: under ``precision="bf16"`` (:mod:`.precision`) the fused form
rounds the operands of each of its matmuls to bf16 (``low``), as autocast rounds a linear
layer's, and keeps :math:`p`, the sums and the results in float32 (autocast's policy for
softmax and cross-entropy); the logits form takes float32 logits.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.autograd import Function
from torch.autograd.function import once_differentiable

__all__ = ["weighted_cross_entropy", "shifted_token_cross_entropy", "linear_cross_entropy", "shift_targets"]


def _softmax_stats(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(p, lse, z_y) with p computed into a new tensor (one allocation)."""
    picked = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    zmax = logits.amax(dim=-1, keepdim=True)
    probs = logits - zmax
    probs.exp_()
    sumexp = probs.sum(dim=-1, keepdim=True)
    probs.div_(sumexp)
    lse = (zmax + sumexp.log()).squeeze(-1)
    return probs, lse, picked


def _mm_into(ws: dict | None, x: Tensor, y: Tensor, like: Tensor) -> Tensor:
    """``x @ y`` written into the reusable buffer; a fresh tensor where ``out=`` is not
    supported (under vmap, e.g. ``autograd.grad(..., is_grads_batched=True)``)."""
    if ws is None:
        return x @ y
    try:
        return torch.mm(x, y, out=_workspace(ws, like))
    except RuntimeError:
        return x @ y


def _workspace(ws: dict | None, like: Tensor) -> Tensor:
    """An uninitialised tensor shaped like ``like``: a view of the caller's reusable flat
    buffer (grown to the largest size seen) when ``ws`` is given, else a new tensor."""
    if ws is None:
        return torch.empty_like(like)
    key = (like.dtype, like.device)
    buf = ws.get(key)
    if buf is None or buf.numel() < like.numel():
        ws.pop(key, None)
        buf = ws[key] = torch.empty(like.numel(), dtype=like.dtype, device=like.device)
    return buf[: like.numel()].view(like.shape)


def _mm(x: Tensor, y: Tensor, low: torch.dtype | None) -> Tensor:
    """``x @ y``; with ``low`` (bf16) on operands rounded to it, the result back in ``x``'s
    dtype: what autocast does to a matmul (:mod:`.precision`)."""
    return x @ y if low is None else (x.to(low) @ y.to(low)).to(x.dtype)


def _addmm_(out: Tensor, x: Tensor, y: Tensor, low: torch.dtype | None) -> Tensor:
    """``out += x @ y`` in place (:func:`_mm` with ``low``)."""
    return out.addmm_(x, y) if low is None else out.add_(_mm(x, y, low))


def _without_autocast(fn):
    """Run a closed form with autocast off: it rounds its own matmul operands (``low``)."""

    @functools.wraps(fn)
    def run(ctx, *args):
        device = next(a.device for a in args if isinstance(a, Tensor))
        with torch.autocast(device.type, enabled=False):
            return fn(ctx, *args)

    return run


class _CrossEntropyGrad(Function):
    """G = g w ⊙ (p − e_y) as a function of the logits (second-order node)."""

    @staticmethod
    @_without_autocast
    def forward(ctx, logits, probs, target, weight, upstream):
        coeff = weight * upstream
        grad = probs * coeff.unsqueeze(-1)
        grad.scatter_add_(-1, target.unsqueeze(-1), -coeff.unsqueeze(-1))
        ctx.save_for_backward(probs, coeff, target, weight)
        return grad

    @staticmethod
    @_without_autocast
    @once_differentiable
    def backward(ctx, grad_bar):
        probs, coeff, target, weight = ctx.saved_tensors
        row = torch.linalg.vecdot(probs, grad_bar).unsqueeze(-1)
        up_bar = None
        if ctx.needs_input_grad[4]:  # ∂/∂g ⟨Ḡ, g w(p − e_y)⟩
            up_bar = (weight * (row.squeeze(-1) - grad_bar.gather(-1, target.unsqueeze(-1)).squeeze(-1))).sum()
        z_bar = grad_bar - row
        z_bar.mul_(probs).mul_(coeff.unsqueeze(-1))
        return z_bar, None, None, None, up_bar


class _CrossEntropy(Function):
    @staticmethod
    @_without_autocast
    def forward(ctx, logits, target, weight):
        probs, lse, picked = _softmax_stats(logits, target)
        ctx.save_for_backward(logits, probs, target, weight)
        return ((lse - picked) * weight).sum()

    @staticmethod
    def backward(ctx, upstream):
        logits, probs, target, weight = ctx.saved_tensors
        return _CrossEntropyGrad.apply(logits, probs, target, weight, upstream), None, None


def weighted_cross_entropy(logits: Tensor, target: Tensor, weight: Tensor) -> Tensor:
    r""":math:`\sum_n w_n\,\mathrm{CE}(z_n, y_n)` over the leading dims of ``logits`` (..., V),
    with closed-form gradient and Hessian-vector product in the logits."""
    return _CrossEntropy.apply(logits, target, weight.to(logits.dtype))


def shift_targets(input_ids: Tensor, scale: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Targets ``input_ids[:, t+1]`` at position t, and weights ``scale`` (0 at the last position)."""
    B, T = input_ids.shape
    target = torch.zeros_like(input_ids)
    target[:, :-1] = input_ids[:, 1:]
    weight = torch.full((B, T), float(scale), dtype=dtype, device=input_ids.device)
    weight[:, -1] = 0.0
    return target, weight


def shifted_token_cross_entropy(logits: Tensor, input_ids: Tensor, scale: float) -> Tensor:
    r"""``scale`` × the sum over predicted tokens of the next-token cross-entropy.

    Equals ``scale * causal_lm_token_loss(logits, input_ids)`` (labels = inputs, shifted
    by one) without slicing the ``(B, T, V)`` logits: the last position has weight 0.
    """
    target, weight = shift_targets(input_ids, scale, logits.dtype)
    return weighted_cross_entropy(logits, target, weight)


class _LinearCrossEntropyGrad(Function):
    """(∂h, ∂W) = (G W, Gᵀ h) of the fused output layer + cross-entropy."""

    @staticmethod
    @_without_autocast
    def forward(ctx, hidden, weight_matrix, probs, target, token_weight, upstream, ws, low):
        coeff = token_weight * upstream
        grad = probs * coeff.unsqueeze(-1)
        grad.scatter_add_(-1, target.unsqueeze(-1), -coeff.unsqueeze(-1))
        d_hidden = _mm(grad, weight_matrix, low)
        d_weight = _mm(grad.T, hidden, low)
        ctx.save_for_backward(hidden, weight_matrix, probs, target, token_weight, coeff)
        ctx.ws, ctx.low = ws, low
        return d_hidden, d_weight

    @staticmethod
    @_without_autocast
    @once_differentiable
    def backward(ctx, a, b):
        hidden, W, probs, target, token_weight, coeff = ctx.saved_tensors
        c, low = coeff.unsqueeze(-1), ctx.low
        if low is not None:  # Ḡ on rounded operands, fp32 sums; no reused buffer
            gbar = sum(_mm(x, y.T, low) for x, y in ((a, W), (hidden, b)) if x is not None and y is not None)
        elif a is not None and b is not None:  # Ḡ = a Wᵀ + h bᵀ; as [a, h] [W, b]ᵀ the copies of
            # the (V, D) matrices cost more than the second pass (5–25% on CPU, N = 128…2048)
            gbar = _mm_into(ctx.ws, a, W.T, probs).addmm_(hidden, b.T)
        elif a is not None:
            gbar = _mm_into(ctx.ws, a, W.T, probs)
        else:
            gbar = _mm_into(ctx.ws, hidden, b.T, probs)
        up_bar = None
        if ctx.needs_input_grad[5]:  # ∂/∂g ⟨Ḡ, g w(p − e_y)⟩ = Σ w(⟨p, Ḡ⟩ − Ḡ_y)
            picked = gbar.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        gbar.mul_(probs)
        row = gbar.sum(dim=-1, keepdim=True)  # ⟨p_n, Ḡ_n⟩
        if ctx.needs_input_grad[5]:
            up_bar = (token_weight * (row.squeeze(-1) - picked)).sum()
        gbar.addcmul_(probs, row, value=-1.0)  # u = p ⊙ (Ḡ − ⟨p, Ḡ⟩); z̄ = c ⊙ u
        h_bar = _mm(gbar, W, low)  # z̄ W = c ⊙ (u W)  (+ G b = c ⊙ (p b − b[y]))
        if b is not None:
            _addmm_(h_bar, probs, b, low).sub_(b[target])
        h_bar.mul_(c)
        w_bar = _mm(gbar.T, c * hidden, low)  # z̄ᵀ h = uᵀ (c ⊙ h)
        if a is not None:  # + Gᵀ a = pᵀ(c a) − rows y of c a
            ca = c * a
            _addmm_(w_bar, probs.T, ca, low)
            w_bar.index_add_(0, target, ca, alpha=-1.0)
        return h_bar, w_bar, None, None, None, up_bar, None, None


class _LinearCrossEntropy(Function):
    @staticmethod
    @_without_autocast
    def forward(ctx, hidden, weight_matrix, target, token_weight, ws, low):
        logits = _mm(hidden, weight_matrix.T, low)
        probs, lse, picked = _softmax_stats(logits, target)
        del logits
        ctx.save_for_backward(hidden, weight_matrix, probs, target, token_weight)
        ctx.ws, ctx.low = ws, low
        return ((lse - picked) * token_weight).sum()

    @staticmethod
    def backward(ctx, upstream):
        hidden, W, probs, target, token_weight = ctx.saved_tensors
        d_hidden, d_weight = _LinearCrossEntropyGrad.apply(hidden, W, probs, target, token_weight, upstream, ctx.ws,
                                                           ctx.low)
        return d_hidden, d_weight, None, None, None, None


def linear_cross_entropy(
    hidden: Tensor, weight_matrix: Tensor, target: Tensor, token_weight: Tensor, workspace: dict | None = None,
    low: torch.dtype | None = None,
) -> Tensor:
    r""":math:`\sum_n w_n\,\mathrm{CE}(W h_n, y_n)` for ``hidden`` ``(N, D)`` and an output
    matrix ``(V, D)`` (no bias), twice differentiable in both, without keeping logits.

    ``workspace`` (a dict owned by the caller) holds the ``(N, V)`` buffer of the
    second-order pass across calls; products must then run one at a time. ``low`` (bf16):
    every matmul of the value, the gradient and the product on operands rounded to it, as
    autocast rounds a linear layer's (:mod:`.precision`); softmax and sums stay in
    ``hidden``'s dtype.
    """
    return _LinearCrossEntropy.apply(hidden, weight_matrix, target, token_weight.to(hidden.dtype), workspace, low)
