r"""Exact Hessian-vector products of a replicated model with its vectors sharded.

Every process holds the whole model; the batches :math:`X_1..X_B` are dealt out
round-robin (process :math:`r` takes :math:`X_r, X_{r+R}, \dots`), and every vector —
probes, Lanczos basis, products — is sharded as in :mod:`.vectors`. With
:math:`N_r` the tokens of process :math:`r`'s batches, :math:`N=\sum_r N_r` and
:math:`L_r` the mean token loss over them,

.. math::
    L = \sum_r \frac{N_r}{N} L_r,\qquad
    \nabla^2F\,v = \sum_r \frac{N_r}{N}\nabla^2L_r\,v + \lambda\, m\odot v .

A product takes this process's shard :math:`v_{(r)}`, all-gathers :math:`v`, applies the
exact :class:`~.model_hessian.ModelHessian` of :math:`L_r` (double backward or
forward-over-reverse, as chosen), weights it by :math:`N_r/N`, and reduce-scatters the
sum over processes back into shards: one all-gather and one reduce-scatter of d numbers
per product, and the products of the R processes run in parallel on their own batches.

**Why not FSDP2.** This is where exact double backward is possible: the parameters are
replicated. Under FSDP2 (``fully_shard``) the sharded parameters are DTensors that are
all-gathered into fresh unsharded tensors *outside* autograd, and the gradient is
reduce-scattered back in a post-backward hook, also outside autograd: on torch 2.13 (CPU,
gloo) ``loss.backward(create_graph=True)`` leaves sharded gradients with no ``grad_fn``,
and ``torch.autograd.grad`` with respect to the sharded parameters finds them unused.
Keeping the unsharded parameters alive and differentiating with respect to them
(``reshard_after_forward=False``) would make every process hold the whole model — this
operator, without FSDP's machinery — and the products would still need the whole
:math:`v` on every process. Sharded *parameters* therefore get the finite-difference
operator (:mod:`.finite_difference_hessian`); this one shards the memory that grows with
the number of Lanczos steps (the basis: steps × d) and the work (batches), not the model.

Memory per process: the model, its gradient graph for its own batches, two transient
d-vectors in a product (the gathered :math:`v` and the local product before the
reduce-scatter), and the sharded vectors (d/R each).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor, nn

from .hessian import Decay, HessianOperator
from .model_hessian import ModelHessian
from .vectors import ShardedVectors, fsdp_param_ranges

__all__ = ["DataParallelHessian"]


class DataParallelHessian(HessianOperator):
    r""":math:`\nabla^2F` of a causal LM replicated on every process, on sharded vectors.

    Args:
        model: the same Hugging Face causal LM on every process (see
            :class:`~.model_hessian.ModelHessian`: float32/float64, eager attention).
        batches: *all* token batches, the same list on every process; process ``r`` uses
            ``batches[r::R]``. There must be at least as many batches as processes.
        lam: λ of the regulariser :math:`\frac\lambda2\|m\odot\theta\|^2`.
        decay: which parameters λ applies to (as for ``ModelHessian``).
        group: the process group (default: the world).
        **hessian_options: passed to this process's ``ModelHessian`` (``method``,
            ``cross_entropy``, ``reuse_graph``, ``vectorize``).

    Attributes:
        dim: d; ``vectors``: the :class:`~.vectors.ShardedVectors` layout
            (``vectors.local_dim`` entries of every vector are held here);
        dtype, device, names, num_tokens (all batches), ``hessian``: this process's
        ``ModelHessian`` of :math:`L_r`.
    """

    def __init__(
        self,
        model: nn.Module,
        batches: Sequence[Tensor],
        *,
        lam: float = 0.0,
        decay: Decay = None,
        group=None,
        **hessian_options,
    ):
        if "lam" in hessian_options:
            raise ValueError("pass lam to DataParallelHessian itself")
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("DataParallelHessian needs torch.distributed initialised (init_process_group)")
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        batches = [batches] if isinstance(batches, Tensor) else list(batches)
        if len(batches) < world:
            raise ValueError(f"batches: {len(batches)} for {world} processes; every process needs at least one")
        self.hessian = ModelHessian(model, batches[rank::world], lam=0.0, decay=decay, **hessian_options)
        self.num_tokens = int(sum(b.shape[0] * (b.shape[1] - 1) for b in batches))
        self._weight = self.hessian.num_tokens / self.num_tokens
        params = dict(model.named_parameters())
        named = [(n, params[n]) for n in self.hessian.names]
        self._params = [p for _, p in named]
        vectors = ShardedVectors([p.shape for _, p in named], group)
        self._held = fsdp_param_ranges([p.shape for _, p in named], vectors.rank, vectors.world_size)
        self._init_layout(named, decay, lam=lam, dtype=self.hessian.dtype, device=self.hessian.device,
                          vectors=vectors, local_shapes=[(b - a,) for a, b in self._held])

    # ------------------------------------------------------------ the data term
    def _local_tensors(self) -> list[Tensor]:
        """This process's flat range of every (replicated) parameter tensor."""
        at, out = 0, []
        for p, (a, b) in zip(self._params, self._held):
            out.append(p.detach().reshape(-1)[a - at : b - at])
            at += p.numel()
        return out

    def data_loss(self) -> float:
        """L(θ) over all batches of all processes (all-reduced)."""
        local = torch.tensor([self._weight * self.hessian.data_loss()], dtype=torch.float64, device=self.device)
        return float(self.vectors.sum(local)[0])

    def data_grad(self) -> Tensor:
        """This process's shard of ∇L(θ) (reduce-scatter of the weighted local gradients)."""
        return self.vectors.reduce_scatter(self._weight * self.hessian.data_grad())

    def _data_matmat(self, V: Tensor) -> Tensor:
        r"""Shards of :math:`\nabla^2L\,v_i`: the rows gathered, one ``ModelHessian.matmat``
        on them, weighted by :math:`N_r/N` and reduce-scattered row by row."""
        HV = self._weight * self.hessian.matmat(torch.stack([self.vectors.gather(v) for v in V]))
        return torch.stack([self.vectors.reduce_scatter(row) for row in HV])

    def release(self) -> None:
        """Free the retained gradient graph (rebuilt on the next product)."""
        self.hessian.release()
