r"""The Hessian of a causal language model's regularised loss as a linear operator.

For a fixed list of token batches :math:`X_1..X_B` (``(B_b, T_b)`` id blocks, labels =
inputs, next-token prediction) with :math:`n_b = B_b (T_b-1)` predicted tokens each and
:math:`N=\sum_b n_b`,

.. math::
    L(\theta) = \frac1N \sum_b \sum_{t\in X_b} \operatorname{CE}_t(\theta),
    \qquad
    F(\theta) = L(\theta) + \frac\lambda2 \|m\odot\theta\|^2,

where :math:`m` is the 0/1 weight-decay mask (all ones by default). Every predicted token
weighs the same, whatever the batch sizes: batch ``b``'s mean cross-entropy enters with
weight :math:`n_b/N`. The regulariser is handled in closed form:
:math:`\nabla F = \nabla L + \lambda\, m\odot\theta` and
:math:`\nabla^2F\,v = \nabla^2L\,v + \lambda\, m\odot v`.

Hessian-vector products (``method``):

- ``"double_backward"`` (reverse-over-reverse, Pearlmutter 1994):
  :math:`\nabla^2L\,v = \nabla_\theta\langle\nabla_\theta L, v\rangle`. The gradient
  :math:`g(\theta)` is built once with ``create_graph=True`` for all batches; each
  product is then one backward pass through that graph (``retain_graph=True``), so the
  forward and first backward are paid once for all probes. With
  ``reuse_graph=False`` the graph is rebuilt per batch per product (O(one batch)
  memory).
- ``"fwd_over_rev"``: :math:`\nabla^2L\,v = \partial_\varepsilon \nabla L(\theta+\varepsilon
  v)|_0` by ``torch.func.jvp`` of ``torch.func.grad`` (not ``jacrev``: ``jvp∘jacrev``
  gets LayerNorm-weight rows wrong in torch 2.13, see ``docs/curvature.md``). Nothing is
  retained between products.

``vectorize=True`` applies a ``matmat`` block in one vmapped pass (``is_grads_batched``
backward, or ``vmap`` of the jvp) instead of one product per row.

For ``double_backward`` the output layer and the cross-entropy are differentiated in
closed form by default (``cross_entropy="closed_form"``, see
:mod:`.softmax_cross_entropy`): when the model is ``base_model`` followed by a bias-free
linear output layer (checked numerically on the first batch), the fused
:func:`~.softmax_cross_entropy.linear_cross_entropy` never stores logits and runs the
six vocabulary-sized matmuls of a product into one reused buffer; otherwise the
closed form applies to the logits. ``cross_entropy="autograd"`` uses
``torch.nn.functional.cross_entropy`` throughout (``fwd_over_rev`` always does).
``loss_path`` records which was used.

Evaluation is in eval mode (dropout off) and in the model's dtype, which must be
float32 or float64 (fp32 matmul precision "highest": no TF32). Attention must be the
``eager`` implementation: flash/SDPA kernels have neither double backward nor
forward-mode AD.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from .causal_lm_loss import batch_token_loss, causal_lm_token_loss, choose_loss_path

__all__ = ["ModelHessian", "decayed_names"]

_METHODS = ("double_backward", "fwd_over_rev")
_CROSS_ENTROPY = ("closed_form", "autograd")


@contextlib.contextmanager
def _highest_matmul_precision():
    """Disable TF32/bf16 matmul shortcuts for float32 while curvature is computed."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def _check_attention(model: nn.Module) -> None:
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl is not None and impl != "eager":
        raise ValueError(
            f"ModelHessian needs attn_implementation='eager', the model uses {impl!r}: "
            "flash/SDPA attention kernels have no double backward or forward-mode AD"
        )


def decayed_names(names: Sequence[str], params: Sequence[nn.Parameter], decay) -> list[str]:
    """The names (in ``names`` order) that the weight-decay spec ``decay`` selects: all for
    ``None``, those listed (each must be a name), or those where ``decay(name, param)``."""
    if decay is None:
        return list(names)
    if callable(decay):
        chosen = {n for n, p in zip(names, params) if decay(n, p)}
    else:
        chosen = set(decay)
        unknown = chosen - set(names)
        if unknown:
            raise ValueError(f"decay names not among the trainable parameters: {sorted(unknown)}")
    return [n for n in names if n in chosen]


class ModelHessian:
    r"""Hessian :math:`\nabla^2 F(\theta)` of a causal LM's regularised token loss.

    Args:
        model: a Hugging Face causal LM (``model(input_ids=...).logits``), float32 or
            float64, eager attention. It is put in eval mode. Its parameters are read
            when this object is built; changing them afterwards makes it raise.
        batches: a list of LongTensor ``(B, T)`` token blocks (or one tensor).
        lam: λ of the regulariser :math:`\frac\lambda2\|m\odot\theta\|^2`.
        method: ``"double_backward"`` or ``"fwd_over_rev"``.
        decay: which parameters λ applies to: ``None`` (all trainable parameters), an
            iterable of parameter names, or a predicate ``(name, param) -> bool``.
        reuse_graph: for ``double_backward``, keep the gradient graph of all batches
            between products. ``None``: yes, unless on CUDA the first batch's graph
            times the number of batches would exceed 70% of free memory.
        cross_entropy: ``"closed_form"`` (default) or ``"autograd"`` derivatives of the
            token cross-entropy in the logits (``double_backward`` only).
        vectorize: apply ``matmat`` blocks in one vmapped pass (``is_grads_batched``
            backward, or ``vmap`` of the jvp) instead of one product per row. Uses k×
            the activation memory; on CPU it was slower (see ``benchmarks/README.md``).

    Attributes:
        dim: number of trainable parameters d (tied tensors counted once).
        dtype, device: of the parameters (and of vectors passed to ``matvec``).
        names: parameter names, in flat-vector order.
        num_tokens: N, predicted tokens in the batches.
    """

    def __init__(
        self,
        model: nn.Module,
        batches: Sequence[Tensor] | Tensor,
        *,
        lam: float = 0.0,
        method: str = "double_backward",
        decay: Iterable[str] | Callable[[str, nn.Parameter], bool] | None = None,
        reuse_graph: bool | None = None,
        cross_entropy: str = "closed_form",
        vectorize: bool = False,
    ):
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if cross_entropy not in _CROSS_ENTROPY:
            raise ValueError(f"cross_entropy must be one of {_CROSS_ENTROPY}, got {cross_entropy!r}")
        self.cross_entropy = cross_entropy if method == "double_backward" else "autograd"
        self.vectorize = bool(vectorize)
        # "fused_head" | "logits_closed_form" | "autograd"; chosen on first use
        self.loss_path: str | None = "autograd" if method == "fwd_over_rev" else None
        self._workspace: dict = {}
        _check_attention(model)
        model.eval()
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not named:
            raise ValueError("model has no trainable parameters")
        dtypes = {p.dtype for _, p in named}
        if len(dtypes) != 1 or not dtypes <= {torch.float32, torch.float64}:
            raise ValueError(f"parameters must all be float32 or all float64, got {sorted(map(str, dtypes))}")
        self.model = model
        self.lam = float(lam)
        self.method = method
        self.names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self.dtype = self._params[0].dtype
        self.device = self._params[0].device
        self._shapes = [p.shape for p in self._params]
        self._sizes = [p.numel() for p in self._params]
        self.dim = int(sum(self._sizes))

        if isinstance(batches, Tensor):
            batches = [batches]
        self.batches = [b.to(self.device, dtype=torch.long) for b in batches]
        if not self.batches or any(b.ndim != 2 or b.shape[1] < 2 for b in self.batches):
            raise ValueError("batches must be a non-empty list of (B, T≥2) token tensors")
        self._tokens = [b.shape[0] * (b.shape[1] - 1) for b in self.batches]
        self.num_tokens = int(sum(self._tokens))

        self._decay_mask = self._build_decay_mask(decay)
        self._versions = self._param_versions()
        self._reuse = reuse_graph
        self._graph_grad: Tensor | None = None  # flat ∇L carrying its graph
        self._data_loss: float | None = None
        self._data_grad: Tensor | None = None
        self._func_hvp = None

    # ------------------------------------------------------------------ helpers
    def _build_decay_mask(self, decay) -> Tensor | None:
        self.decay_names = decayed_names(self.names, self._params, decay)
        if decay is None:
            return None
        chosen = set(self.decay_names)
        return torch.cat(
            [torch.full((s,), float(n in chosen), dtype=self.dtype, device=self.device) for n, s in zip(self.names, self._sizes)]
        )

    def _param_versions(self) -> tuple[int, ...]:
        return tuple(p._version for p in self._params)

    def _check_unchanged(self) -> None:
        if self._param_versions() != self._versions:
            raise RuntimeError("model parameters changed since this ModelHessian was built; build a new one")

    def _flat(self, tensors: Sequence[Tensor | None]) -> Tensor:
        return torch.cat(
            [
                (t if t is not None else torch.zeros(s, dtype=self.dtype, device=self.device)).reshape(-1)
                for t, s in zip(tensors, self._shapes)
            ]
        )

    def _split_rows(self, V: Tensor) -> list[Tensor]:
        return [c.reshape(V.shape[0], *s) for c, s in zip(torch.split(V, self._sizes, dim=-1), self._shapes)]

    def _batch_loss(self, x: Tensor) -> Tensor:
        """Batch contribution Σ_t CE_t / N (weight n_b/N times the batch mean)."""
        if self.loss_path is None:
            self.loss_path = choose_loss_path(self.model, self.batches[0], self.cross_entropy)
        return batch_token_loss(self.model, x, 1.0 / self.num_tokens, self.loss_path, self._workspace)

    def _regularizer_dir(self, v: Tensor) -> Tensor:
        return v if self._decay_mask is None else v * self._decay_mask

    # ------------------------------------------------------------ public values
    def flat_params(self) -> Tensor:
        """θ as one flat vector (detached copy), in ``names`` order."""
        return torch.cat([p.detach().reshape(-1) for p in self._params])

    def param_blocks(self) -> dict[str, slice]:
        """The partition of the flat vector by parameter tensor: ``{name: slice}``."""
        out, start = {}, 0
        for name, size in zip(self.names, self._sizes):
            out[name] = slice(start, start + size)
            start += size
        return out

    def decay_mask(self) -> Tensor:
        """The 0/1 mask m of the regulariser as a flat vector."""
        if self._decay_mask is None:
            return torch.ones(self.dim, dtype=self.dtype, device=self.device)
        return self._decay_mask.clone()

    def theta_sq_norm(self) -> float:
        r""":math:`\|m\odot\theta\|^2`, the regularised squared norm."""
        return float(self._regularizer_dir(self.flat_params()).square().sum(dtype=torch.float64))

    def data_loss(self) -> float:
        """L(θ): mean cross-entropy over all predicted tokens of the batches."""
        self._ensure_first_order()
        return self._data_loss

    def loss(self) -> float:
        r"""F(θ) = L(θ) + (λ/2)‖m⊙θ‖²."""
        return self.data_loss() + 0.5 * self.lam * self.theta_sq_norm()

    def data_grad(self) -> Tensor:
        """∇L(θ), flat, accumulated over the batches with token weights."""
        self._ensure_first_order()
        return self._data_grad.clone()

    def grad(self) -> Tensor:
        r"""∇F(θ) = ∇L(θ) + λ m⊙θ, flat."""
        g = self.data_grad()
        if self.lam:
            g = g + self.lam * self._regularizer_dir(self.flat_params())
        return g

    # ------------------------------------------------------------------ products
    def matvec(self, v: Tensor) -> Tensor:
        r""":math:`\nabla^2F(\theta)\,v` for a flat ``v`` of length ``dim``."""
        if v.shape != (self.dim,):
            raise ValueError(f"expected a vector of shape ({self.dim},), got {tuple(v.shape)}")
        v = v.to(device=self.device, dtype=self.dtype)
        return self._hvp_rows(v.unsqueeze(0))[0]

    def matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2F(\theta)\,v_i` for a ``(k, dim)`` block of vectors."""
        if V.ndim != 2 or V.shape[1] != self.dim:
            raise ValueError(f"expected a (k, {self.dim}) block, got {tuple(V.shape)}")
        return self._hvp_rows(V.to(device=self.device, dtype=self.dtype))

    def release(self) -> None:
        """Free the retained gradient graph and work buffers (rebuilt on the next product)."""
        self._graph_grad = None
        self._workspace.clear()

    # ----------------------------------------------------------------- internals
    def _ensure_first_order(self) -> None:
        self._check_unchanged()
        if self._data_grad is not None:
            return
        if self.method == "double_backward" and self._reuse is not False:
            self._build_graph()
            return
        loss_total, grad_total = 0.0, torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        with _highest_matmul_precision(), torch.enable_grad():
            for x in self.batches:
                loss = self._batch_loss(x)
                grads = torch.autograd.grad(loss, self._params, allow_unused=True)
                grad_total += self._flat(grads)
                loss_total += float(loss.detach())
        self._data_loss, self._data_grad = loss_total, grad_total

    def _build_graph(self) -> None:
        """Forward + first backward with ``create_graph=True`` for all batches."""
        loss_total, flat_total = 0.0, None
        with _highest_matmul_precision(), torch.enable_grad():
            for i, x in enumerate(self.batches):
                before = torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0
                loss = self._batch_loss(x)
                grads = torch.autograd.grad(loss, self._params, create_graph=True, allow_unused=True)
                flat = self._flat(grads)
                flat_total = flat if flat_total is None else flat_total + flat
                loss_total += float(loss.detach())
                if i == 0 and self._reuse is None:
                    self._reuse = self._graph_fits(before)
                    if not self._reuse:
                        self._ensure_first_order_without_graph()
                        return
        self._data_loss = loss_total
        self._data_grad = flat_total.detach().clone()
        self._graph_grad = flat_total
        self._reuse = True

    def _ensure_first_order_without_graph(self) -> None:
        self._data_grad = None
        self._reuse = False
        self._ensure_first_order()

    def _graph_fits(self, before: int) -> bool:
        if self.device.type != "cuda":
            return True
        per_batch = torch.cuda.memory_allocated(self.device) - before
        free, _ = torch.cuda.mem_get_info(self.device)
        return per_batch * (len(self.batches) - 1) < 0.7 * free

    def _hvp_rows(self, V: Tensor) -> Tensor:
        self._check_unchanged()
        with _highest_matmul_precision():
            if self.method == "fwd_over_rev":
                HV = self._hvp_fwd_over_rev(V)
            else:
                HV = self._hvp_double_backward(V)
        if self.lam:
            HV = HV + self.lam * self._regularizer_dir(V)
        return HV

    def _hvp_double_backward(self, V: Tensor) -> Tensor:
        if self._reuse is not False and self._graph_grad is None:
            self._build_graph()
        if self._reuse:
            return self._grad_of_dot_rows(self._graph_grad, V, retain=True)
        out = torch.zeros_like(V)
        with torch.enable_grad():
            for x in self.batches:
                grads = torch.autograd.grad(self._batch_loss(x), self._params, create_graph=True, allow_unused=True)
                out += self._grad_of_dot_rows(self._flat(grads), V, retain=False)
        return out

    def _grad_of_dot_rows(self, flat_grad: Tensor, V: Tensor, *, retain: bool) -> Tensor:
        """Rows ∇⟨g, v_i⟩ (one backward each, or one vmapped backward if ``vectorize``)."""
        if self.vectorize and V.shape[0] > 1:
            hv = torch.autograd.grad(
                flat_grad, self._params, grad_outputs=V, retain_graph=retain, allow_unused=True,
                materialize_grads=True, is_grads_batched=True,
            )
            return torch.cat([h.reshape(V.shape[0], -1) for h in hv], dim=1)
        last = V.shape[0] - 1
        return torch.stack([self._grad_of_dot(flat_grad, v, retain=retain or i < last) for i, v in enumerate(V)])

    def _grad_of_dot(self, flat_grad: Tensor, v: Tensor, *, retain: bool) -> Tensor:
        hv = torch.autograd.grad(
            flat_grad, self._params, grad_outputs=v, retain_graph=retain, allow_unused=True, materialize_grads=True
        )
        return torch.cat([h.reshape(-1) for h in hv])

    def _hvp_fwd_over_rev(self, V: Tensor) -> Tensor:
        if self._func_hvp is None:
            self._func_hvp = self._make_func_hvp()
        params = tuple(p.detach() for p in self._params)
        tangents = tuple(self._split_rows(V))
        out = None
        for x in self.batches:
            rows = self._func_hvp(params, x, tangents)
            flat = torch.cat([r.reshape(V.shape[0], -1) for r in rows], dim=1)
            out = flat if out is None else out + flat
        return out

    def _make_func_hvp(self):
        from torch.func import functional_call, grad, jvp, vmap

        names, model, n_tokens = self.names, self.model, self.num_tokens

        def loss_fn(params: tuple[Tensor, ...], x: Tensor) -> Tensor:
            logits = functional_call(model, dict(zip(names, params)), args=(), kwargs={"input_ids": x, "use_cache": False}).logits
            return causal_lm_token_loss(logits, x) / n_tokens

        grad_fn = grad(loss_fn)

        def hvp_one(params, x, tangent):
            return jvp(lambda p: grad_fn(p, x), (params,), (tangent,))[1]

        def hvp_rows(params, x, tangents):
            if self.vectorize and tangents[0].shape[0] > 1:
                return vmap(hvp_one, in_dims=(None, None, 0))(params, x, tangents)
            rows = [hvp_one(params, x, tuple(t[i] for t in tangents)) for i in range(tangents[0].shape[0])]
            return tuple(torch.stack(col) for col in zip(*rows))

        return hvp_rows
