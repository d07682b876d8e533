r"""The token-weighted next-token loss of a Hugging Face causal LM, three ways.

A batch ``x`` of shape ``(B, T)`` contributes :math:`s\sum_{b,t<T-1} \mathrm{CE}(z_{b,t},
x_{b,t+1})` (labels = inputs, shifted as in Hugging Face's causal-LM loss), with
:math:`s = 1/N` for N predicted tokens over all batches. The value and every derivative
are the same on each path; they differ in what the autograd graph keeps and how much work
a Hessian-vector product does:

- ``"autograd"``: ``F.cross_entropy`` on ``model(x).logits`` (works for any model, and
  under ``torch.func`` transforms).
- ``"logits_closed_form"``: :func:`~.softmax_cross_entropy.shifted_token_cross_entropy`
  on the logits (closed-form derivatives in the logits).
- ``"fused_head"``: ``model.base_model`` then
  :func:`~.softmax_cross_entropy.linear_cross_entropy` with the output layer's weight —
  no logits are stored. Chosen only when the model's output layer is a bias-free
  ``nn.Linear`` and ``base_model`` followed by it reproduces ``model(x).logits``
  (checked once per model, on the first tokens of one sequence).
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .precision import autocast_dtype
from .softmax_cross_entropy import linear_cross_entropy, shifted_token_cross_entropy

__all__ = ["causal_lm_token_loss", "choose_loss_path", "batch_token_loss", "functional_hvp_rows", "LOSS_PATHS"]

LOSS_PATHS = ("fused_head", "logits_closed_form", "autograd")


def causal_lm_token_loss(logits: Tensor, input_ids: Tensor) -> Tensor:
    r"""Sum over predicted tokens of the next-token cross-entropy (labels = inputs, shifted).

    ``logits`` is ``(B, T, V)``; position ``t`` predicts ``input_ids[:, t+1]``, as in
    Hugging Face's causal-LM loss, so ``B (T-1)`` tokens contribute.
    """
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1, :].reshape(-1, vocab), input_ids[:, 1:].reshape(-1), reduction="sum")


def _head_and_base(model: nn.Module) -> tuple[nn.Linear, nn.Module] | None:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    base = getattr(model, "base_model", None)
    if not isinstance(head, nn.Linear) or head.bias is not None or base is None or base is model:
        return None
    return head, base


_CHOSEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""model -> its closed-form path, decided once per model (the check runs the model)."""


def choose_loss_path(model: nn.Module, example: Tensor, cross_entropy: str) -> str:
    """The fastest exact path for ``model``: ``"autograd"`` if asked for, else
    ``"fused_head"`` when verified on the first 8 tokens of ``example[:1]``, else
    ``"logits_closed_form"``. Decided once per model object (the answer depends on the
    architecture, not on the weights or the batch) and remembered while the model lives."""
    if cross_entropy == "autograd":
        return "autograd"
    if model not in _CHOSEN:
        _CHOSEN[model] = _verified_path(model, example[:1, :8])
    return _CHOSEN[model]


def _verified_path(model: nn.Module, x: Tensor) -> str:
    parts = _head_and_base(model)
    if parts is None:
        return "logits_closed_form"
    head, base = parts
    with torch.no_grad():
        ref = model(input_ids=x, use_cache=False).logits
        fused = base(input_ids=x, use_cache=False)[0] @ head.weight.T
    if fused.shape != ref.shape:
        return "logits_closed_form"
    tol = 1e-5 * max(float(ref.abs().max()), 1.0)
    return "fused_head" if float((fused - ref).abs().max()) <= tol else "logits_closed_form"


def batch_token_loss(model: nn.Module, x: Tensor, scale: float, path: str, workspace: dict | None = None) -> Tensor:
    """``scale`` × the summed next-token cross-entropy of batch ``x`` along ``path``.

    Under autocast (``precision="bf16"``, :mod:`.precision`) the closed forms take the
    hidden states or logits back in the parameters' dtype, and the fused output layer
    rounds its own matmul operands as autocast would (``low``)."""
    low = autocast_dtype(x.device)
    if path == "fused_head":
        head, base = _head_and_base(model)
        hidden = base(input_ids=x, use_cache=False)[0]
        h = hidden[:, :-1, :].reshape(-1, hidden.shape[-1]).to(head.weight.dtype)
        weight = torch.full((h.shape[0],), scale, dtype=h.dtype, device=h.device)
        return linear_cross_entropy(h, head.weight, x[:, 1:].reshape(-1), weight, workspace, low)
    logits = model(input_ids=x, use_cache=False).logits
    if path == "logits_closed_form":
        return shifted_token_cross_entropy(logits if low is None else logits.float(), x, scale)
    if path == "autograd":
        return causal_lm_token_loss(logits, x) * scale
    raise ValueError(f"loss path must be one of {LOSS_PATHS}, got {path!r}")


def functional_hvp_rows(model: nn.Module, names: list[str], scale: float, vectorize: bool):
    r"""``(params, x, tangents) -> rows`` of :math:`\nabla^2 \ell_x\,t_i` for
    :math:`\ell_x` = ``scale`` × the token loss of batch ``x`` (``"autograd"`` path) as a
    function of the parameters ``names``: forward-over-reverse, ``torch.func.jvp`` of
    ``torch.func.grad``; the rows of ``tangents`` (per-tensor ``(k, ...)`` blocks) one by
    one, or in one ``vmap`` when ``vectorize``."""
    from torch.func import functional_call, grad, jvp, vmap

    def loss_fn(params: tuple[Tensor, ...], x: Tensor) -> Tensor:
        kwargs = {"input_ids": x, "use_cache": False}
        logits = functional_call(model, dict(zip(names, params)), args=(), kwargs=kwargs).logits
        return causal_lm_token_loss(logits, x) * scale

    grad_fn = grad(loss_fn)

    def hvp_one(params, x, tangent):
        return jvp(lambda p: grad_fn(p, x), (params,), (tangent,))[1]

    def hvp_rows(params, x, tangents):
        if vectorize and tangents[0].shape[0] > 1:
            return vmap(hvp_one, in_dims=(None, None, 0))(params, x, tangents)
        rows = [hvp_one(params, x, tuple(t[i] for t in tangents)) for i in range(tangents[0].shape[0])]
        return tuple(torch.stack(col) for col in zip(*rows))

    return hvp_rows
