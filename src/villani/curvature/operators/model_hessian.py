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
``loss_path`` records which was used; the choice is made once per model
(:func:`~.causal_lm_loss.choose_loss_path` caches it), not per graph build.

**Vectors.** Flat d-vectors exist only at the boundary (``matvec`` takes and returns
one). Inside, ``v`` is split into per-tensor views, the graph keeps the per-tensor
gradients autograd returns (no flattened copy carrying a graph), and the second backward
copies each parameter's part of the product into its slice of the one output vector the
moment autograd has it, then drops it (post-accumulate hooks; the parameters' ``.grad``
are set aside and restored): a product allocates one d-vector, as plain autograd's list
of per-tensor results does, and places it in one pass. ``build_seconds`` / ``builds``
count the forward + first backward passes (builds; with ``reuse_graph=False`` one in
every product). A build never makes the host wait for a (launch-bound) GPU: losses are
summed on the device, builds timed by CUDA events (:class:`.device_timer.DeviceTimer`).

Evaluation is in eval mode (dropout off) and in the model's dtype, which must be
float32 or float64; ``precision`` (:mod:`.precision`; default ``"highest"``: no TF32)
is that of graph builds and products, vectors stay in the model's dtype (loss and ∇L
come from the same graph: take them at ``"highest"``). Attention must be the
``eager`` implementation: flash/SDPA kernels have neither double backward nor
forward-mode AD.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .causal_lm_loss import batch_token_loss, choose_loss_path, functional_hvp_rows
from .device_timer import DeviceTimer
from .hessian import Decay, HessianOperator
from .precision import check_precision, product_precision

__all__ = ["ModelHessian"]

_METHODS = ("double_backward", "fwd_over_rev")
_CROSS_ENTROPY = ("closed_form", "autograd")


def _check_attention(model: nn.Module) -> None:
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl is not None and impl != "eager":
        raise ValueError(
            f"ModelHessian needs attn_implementation='eager', the model uses {impl!r}: "
            "flash/SDPA attention kernels have no double backward or forward-mode AD"
        )


class ModelHessian(HessianOperator):
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
        precision: ``"highest"``, ``"tf32"`` or ``"bf16"`` (:mod:`.precision`).

    Attributes:
        dim: number of trainable parameters d (tied tensors counted once).
        dtype, device: of the parameters (and of vectors passed to ``matvec``).
        names: parameter names, in flat-vector order.
        num_tokens: N, predicted tokens in the batches.
        build_seconds, builds: wall seconds spent in, and number of, forward + first
            backward passes over a batch (graph builds and rebuilds, first-order passes;
            with ``fwd_over_rev`` one per product per batch, its seconds inside the product's).
    """

    def __init__(
        self,
        model: nn.Module,
        batches: Sequence[Tensor] | Tensor,
        *,
        lam: float = 0.0,
        method: str = "double_backward",
        decay: Decay = None,
        reuse_graph: bool | None = None,
        cross_entropy: str = "closed_form",
        vectorize: bool = False,
        precision: str = "highest",
    ):
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if cross_entropy not in _CROSS_ENTROPY:
            raise ValueError(f"cross_entropy must be one of {_CROSS_ENTROPY}, got {cross_entropy!r}")
        self.cross_entropy = cross_entropy if method == "double_backward" else "autograd"
        self.vectorize = bool(vectorize)
        self.precision = check_precision(precision)
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
        self.method = method
        self._params = [p for _, p in named]
        self._init_layout(named, decay, lam=lam, dtype=self._params[0].dtype, device=self._params[0].device)

        if isinstance(batches, Tensor):
            batches = [batches]
        self.batches = [b.to(self.device, dtype=torch.long) for b in batches]
        if not self.batches or any(b.ndim != 2 or b.shape[1] < 2 for b in self.batches):
            raise ValueError("batches must be a non-empty list of (B, T≥2) token tensors")
        self._tokens = [b.shape[0] * (b.shape[1] - 1) for b in self.batches]
        self.num_tokens = int(sum(self._tokens))

        self._versions = tuple(p._version for p in self._params)
        self._reuse = reuse_graph
        self._graph: list[list[Tensor | None]] | None = None  # per batch: ∇L_b per tensor, with graph
        self._data_loss: Tensor | None = None  # Σ_b loss_b on the device, float64
        self._grads: list[list[Tensor | None]] | None = None  # per batch: ∇L_b per tensor, detached
        self._func_hvp = None
        self._build_timer = DeviceTimer(self.device)
        self.builds = 0

    # ------------------------------------------------------------------ helpers
    def _check_unchanged(self) -> None:
        if tuple(p._version for p in self._params) != self._versions:
            raise RuntimeError("model parameters changed since this ModelHessian was built; build a new one")

    def _batch_loss(self, x: Tensor) -> Tensor:
        """Batch contribution Σ_t CE_t / N (weight n_b/N times the batch mean)."""
        if self.loss_path is None:
            self.loss_path = choose_loss_path(self.model, self.batches[0], self.cross_entropy)
        return batch_token_loss(self.model, x, 1.0 / self.num_tokens, self.loss_path, self._workspace)

    def _batch_grads(self, x: Tensor, *, create_graph: bool) -> tuple[Tensor, list[Tensor | None]]:
        """(loss as a float64 0-d tensor on the device, per-tensor ∇L_b) of one batch: one
        forward + first backward, timed without waiting for the device (module docstring)."""
        with self._build_timer.span(), torch.enable_grad():
            loss = self._batch_loss(x)
            grads = torch.autograd.grad(loss, self._params, create_graph=create_graph, allow_unused=True)
        self.builds += 1
        return loss.detach().to(torch.float64), list(grads)

    @property
    def build_seconds(self) -> float:
        """Seconds spent in forward + first backward passes so far (:class:`.device_timer.DeviceTimer`)."""
        return self._build_timer.seconds

    # ------------------------------------------------------------ the data term
    def _local_tensors(self) -> list[Tensor]:
        """The parameter tensors themselves (one process holds them whole)."""
        return self._params

    def data_loss(self) -> float:
        """L(θ): mean cross-entropy over all predicted tokens of the batches."""
        self._ensure_first_order()
        return float(self._data_loss)

    def data_grad(self) -> Tensor:
        """∇L(θ), flat (a new vector), accumulated over the batches with token weights."""
        self._ensure_first_order()
        flat = torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        views = self._views(flat)
        for grads in self._grads:
            for view, g in zip(views, grads):
                if g is not None:
                    view.add_(g)
        return flat

    def release(self) -> None:
        """Free the retained gradient graph and work buffers (rebuilt on the next product)."""
        self._graph = None
        self._workspace.clear()

    # ----------------------------------------------------------------- internals
    def _ensure_first_order(self) -> None:
        self._check_unchanged()
        if self._grads is not None:
            return
        if self.method == "double_backward" and self._reuse is not False:
            self._build_graph()
            return
        loss_total, self._grads = torch.zeros((), dtype=torch.float64, device=self.device), []
        with product_precision(self.precision, self.device):
            for x in self.batches:
                loss, grads = self._batch_grads(x, create_graph=False)
                self._grads.append(grads)
                loss_total += loss
        self._data_loss = loss_total

    def _build_graph(self) -> None:
        """Forward + first backward with ``create_graph=True`` for all batches."""
        loss_total, graph = torch.zeros((), dtype=torch.float64, device=self.device), []
        with product_precision(self.precision, self.device):
            for i, x in enumerate(self.batches):
                before = torch.cuda.memory_allocated(self.device) if self.device.type == "cuda" else 0
                loss, grads = self._batch_grads(x, create_graph=True)
                graph.append(grads)
                loss_total += loss
                if i == 0 and self._reuse is None:
                    self._reuse = self._graph_fits(before)
                    if not self._reuse:  # first-order quantities without the graph
                        del graph, grads
                        return self._ensure_first_order()
        self._data_loss, self._graph = loss_total, graph
        self._grads = [[None if g is None else g.detach() for g in grads] for grads in graph]
        self._reuse = True

    @property
    def graph_kept(self) -> bool:
        """Products reuse one gradient graph; False: it did not fit (CUDA), ``reuse_graph=False``,
        or ``fwd_over_rev`` (which keeps nothing: every product reruns forward and backward)."""
        return self.method == "double_backward" and self._reuse is not False

    def _graph_fits(self, before: int) -> bool:
        if self.device.type != "cuda":
            return True
        per_batch = torch.cuda.memory_allocated(self.device) - before
        free, _ = torch.cuda.mem_get_info(self.device)
        return per_batch * (len(self.batches) - 1) < 0.7 * free

    def _data_matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2L\,v_i`: by the method, at the product precision."""
        self._check_unchanged()
        with product_precision(self.precision, self.device):
            if self.method == "fwd_over_rev":
                return self._hvp_fwd_over_rev(V)
            return self._hvp_double_backward(V)

    def _hvp_double_backward(self, V: Tensor) -> Tensor:
        if self._reuse is not False and self._graph is None:
            self._build_graph()
        if self._reuse:
            return self._backward_rows(self._graph, V, retain=True)
        out = None
        for x in self.batches:
            _, grads = self._batch_grads(x, create_graph=True)
            rows = self._backward_rows([grads], V, retain=False, out=out)
            out = rows if out is None else out
        return out

    def _backward_rows(self, graph: list[list[Tensor | None]], V: Tensor, *, retain: bool,
                       out: Tensor | None = None) -> Tensor:
        r"""Rows :math:`\sum_b \nabla\langle\nabla L_b, v_i\rangle` for the batches' per-tensor
        gradients in ``graph``, added into ``out`` (a new zero block when None): one
        backward per row, or one vmapped backward (``vectorize``) for the block."""
        live = [(g, j) for grads in graph for j, g in enumerate(grads) if g is not None and g.requires_grad]
        if self.vectorize and V.shape[0] > 1:
            rows = self._split_rows(V)
            hv = torch.autograd.grad([g for g, _ in live], self._params, grad_outputs=[rows[j] for _, j in live],
                                     retain_graph=retain, allow_unused=True, materialize_grads=True,
                                     is_grads_batched=True)
            block = torch.cat([h.reshape(V.shape[0], -1) for h in hv], dim=1)
            return block if out is None else out.add_(block)
        if not live:
            return torch.zeros_like(V) if out is None else out
        fresh, out = out is None, torch.empty_like(V) if out is None else out
        for i, v in enumerate(V):
            views = self._views(v)
            self._backward_into([g for g, _ in live], [views[j] for _, j in live], out[i],
                                retain=retain or i < V.shape[0] - 1, fresh=fresh)
        return out

    def _backward_into(self, outputs: list[Tensor], cotangents: list[Tensor], out: Tensor, *, retain: bool,
                       fresh: bool) -> None:
        """out = (fresh) or += ∇_θ Σ⟨outputs, cotangents⟩. Each parameter's part is copied
        (added) into its slice of ``out`` as soon as autograd has accumulated it, then
        dropped (a post-accumulate hook; the parameters' own ``.grad`` are set aside and
        restored): one pass to place it, and one parameter's part alive at a time."""
        views = self._views(out)
        reached = [False] * len(views)

        def placer(i: int):
            def place(p: Tensor) -> None:
                (views[i].copy_ if fresh else views[i].add_)(p.grad)
                p.grad, reached[i] = None, True
            return place

        saved, handles = [p.grad for p in self._params], []
        try:
            for i, p in enumerate(self._params):
                p.grad = None
                handles.append(p.register_post_accumulate_grad_hook(placer(i)))
            torch.autograd.backward(outputs, cotangents, retain_graph=retain, inputs=self._params)
        finally:
            for handle in handles:
                handle.remove()
            for p, g in zip(self._params, saved):
                p.grad = g
        for view in (v for v, hit in zip(views, reached) if fresh and not hit):
            view.zero_()  # a parameter the product does not reach

    def _hvp_fwd_over_rev(self, V: Tensor) -> Tensor:
        if self._func_hvp is None:
            self._func_hvp = functional_hvp_rows(self.model, self.names, 1.0 / self.num_tokens, self.vectorize)
        params = tuple(p.detach() for p in self._params)
        tangents = tuple(self._split_rows(V))
        out = None
        for x in self.batches:
            rows = self._func_hvp(params, x, tangents)
            self.builds += V.shape[0]  # each row reran forward + backward on the batch (timed with the product)
            flat = torch.cat([r.reshape(V.shape[0], -1) for r in rows], dim=1)
            out = flat if out is None else out + flat
        return out
