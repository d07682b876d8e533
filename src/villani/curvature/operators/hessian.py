r"""The base class of the model Hessians: :math:`\nabla^2F` of a regularised token loss.

For parameters :math:`\theta` (the trainable tensors, flattened in ``named_parameters``
order), a data loss :math:`L` and the 0/1 weight-decay mask :math:`m`,

.. math::
    F(\theta) = L(\theta) + \frac\lambda2\|m\odot\theta\|^2,\qquad
    \nabla F = \nabla L + \lambda\, m\odot\theta,\qquad
    \nabla^2F\,v = \nabla^2L\,v + \lambda\, m\odot v .

Everything but :math:`L` is the same for every way of computing it, and is written here
once: the flat layout (``dim``, ``param_blocks``, per-tensor views of flat vectors), the
mask and the regulariser, the composition of :math:`F` and :math:`\nabla F`
(:meth:`~HessianOperator.objective`, an :class:`~.objective.Objective`: λ is the
operator's, callers never add λθ or λI themselves), the checks of a product's input, and
the count of products. A number deliberately about L alone — tr ∇²L, whose λ part
λ·Σm is exact — is taken on :meth:`~HessianOperator.data_hessian`, the view of ∇²L. A subclass writes the data term only (the
curvlinops pattern: the subclass writes the batch product, the base class the rest):

- ``_data_matmat(V)``: the rows :math:`\nabla^2L\,v_i` of a ``(k, local_dim)`` block
  (already on ``device`` in ``dtype``);
- ``data_loss()`` and ``data_grad()``: :math:`L(\theta)` and :math:`\nabla L(\theta)`;
- ``_local_tensors()``: this process's part of every parameter tensor, in flat order
  (the tensors themselves, or their FSDP2 shards);
- ``release()`` where it keeps something between products.

Vectors are in the layout of ``vectors`` (:mod:`.vectors`): whole d-vectors, or this
process's shards of them (``local_dim`` entries). The subclasses:
:class:`~.model_hessian.ModelHessian` (exact, one process),
:class:`~.data_parallel_hessian.DataParallelHessian` (exact, model replicated, vectors
sharded) and :class:`~.finite_difference_hessian.FiniteDifferenceHessian` (central
differences of gradients, FSDP2-sharded or plain).

**The mask.** ``decay`` selects the tensors λ applies to (:func:`decayed_names`); on the
flat vector of this process they are maximal runs of consecutive coordinates
(:func:`decay_runs`), so :math:`\lambda\,m\odot v` is an in-place add on a few slices — no
mask vector is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
from torch import Tensor, nn

from .objective import Objective, regularised_loss
from .vectors import LocalVectors

__all__ = ["HessianOperator", "DataHessian", "Decay", "decayed_names", "decay_runs"]

#: Which parameters λ applies to: all (None), their names, or a predicate (name, param) -> bool.
Decay = Iterable[str] | Callable[[str, nn.Parameter], bool] | None


def decayed_names(names: Sequence[str], params: Sequence[nn.Parameter], decay: Decay) -> list[str]:
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


def decay_runs(flags: Sequence[bool], sizes: Sequence[int]) -> list[slice]:
    """Maximal runs of consecutive flagged tensors as slices of the flat vector."""
    out, start = [], 0
    for flag, size in zip(flags, sizes):
        if flag and out and out[-1].stop == start:
            out[-1] = slice(out[-1].start, start + size)
        elif flag:
            out.append(slice(start, start + size))
        start += size
    return out


class HessianOperator:
    r""":math:`\nabla^2F(\theta)` at fixed parameters, as a symmetric linear operator on flat
    parameter vectors (in ``vectors``' layout), with the first-order quantities measured
    beside the curvature. See the module docstring for what a subclass writes.

    Attributes:
        dim: d, the number of trainable parameters (tied tensors counted once).
        dtype, device: of vectors.
        names: the parameter tensors, in flat-vector order; ``decay_names`` those λ applies
            to (m = 1).
        num_tokens: N, the predicted tokens over all batches.
        lam: λ.
        vectors: the layout of vectors (:class:`~.vectors.LocalVectors` or
            :class:`~.vectors.ShardedVectors`).
        products: the rows :math:`\nabla^2F\,v` applied so far (``matvec`` counts one,
            ``matmat`` one per row).
    """

    dim: int
    dtype: torch.dtype
    device: torch.device
    names: list[str]  # parameter tensors, in flat-vector order
    decay_names: list[str]  # those λ applies to (m = 1)
    num_tokens: int  # N, predicted tokens over all batches
    lam: float

    def _init_layout(self, named: Sequence[tuple[str, nn.Parameter]], decay: Decay, *, lam: float,
                     dtype: torch.dtype, device: torch.device, vectors=None,
                     local_shapes: Sequence[Sequence[int]] | None = None) -> None:
        """Set the members every subclass shares from its ``(name, parameter)`` pairs:
        ``local_shapes`` are the shapes of this process's part of each tensor (default:
        the parameters' shapes), ``vectors`` the layout (default whole vectors)."""
        self.names = [n for n, _ in named]
        self._shapes = [torch.Size(p.shape) for _, p in named]
        self._sizes = [s.numel() for s in self._shapes]
        self.dim = int(sum(self._sizes))
        self.lam = float(lam)
        self.dtype, self.device = dtype, device
        self.vectors = vectors if vectors is not None else LocalVectors(self.dim)
        self._local_shapes = [torch.Size(s) for s in (local_shapes if local_shapes is not None else self._shapes)]
        self.decay_names = decayed_names(self.names, [p for _, p in named], decay)
        chosen = set(self.decay_names)
        self._decayed = [n in chosen for n in self.names]
        self._decay_runs = decay_runs(self._decayed, [s.numel() for s in self._local_shapes])  # slices where m = 1
        self.products = 0

    # ------------------------------------------------------------- what a subclass writes
    def _data_matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2L\,v_i` of a ``(k, local_dim)`` block on ``device`` in ``dtype``."""
        raise NotImplementedError

    def _local_tensors(self) -> list[Tensor]:
        """This process's part of every parameter tensor, in flat order."""
        raise NotImplementedError

    def data_loss(self) -> float:
        """L(θ), the mean token cross-entropy."""
        raise NotImplementedError

    def data_grad(self) -> Tensor:
        r""":math:`\nabla L(\theta)`, flat (a new vector)."""
        raise NotImplementedError

    def release(self) -> None:
        """Free what is kept between products (graphs, buffers); the next product rebuilds it."""

    # ------------------------------------------------------------- written once
    def param_blocks(self) -> dict[str, slice]:
        """``{name: slice}``: each parameter tensor's part of the (global) flat vector."""
        out, start = {}, 0
        for name, size in zip(self.names, self._sizes):
            out[name] = slice(start, start + size)
            start += size
        return out

    def flat_params(self) -> Tensor:
        r""":math:`\theta` (this process's part), detached: a new vector."""
        return torch.cat([t.detach().reshape(-1) for t in self._local_tensors()]).to(self.dtype)

    def decay_mask(self) -> Tensor:
        """The 0/1 mask m as a flat vector (this process's part)."""
        mask = torch.zeros(self.vectors.local_dim, dtype=self.dtype, device=self.device)
        for sl in self._decay_runs:
            mask[sl] = 1.0
        return mask

    def theta_sq_norm(self) -> float:
        r""":math:`\|m\odot\theta\|^2` (global), in float64."""
        parts = [t.detach().to(self.dtype).double().square().sum()
                 for t, m in zip(self._local_tensors(), self._decayed) if m]
        local = torch.stack(parts).sum() if parts else torch.zeros((), dtype=torch.float64, device=self.device)
        return float(self.vectors.sum(local))

    def loss(self) -> float:
        r"""F(θ) = L(θ) + (λ/2)‖m⊙θ‖² (:func:`~.objective.regularised_loss`)."""
        return regularised_loss(self.data_loss(), self.theta_sq_norm(), self.lam)

    def objective(self) -> Objective:
        r"""F, ∇F and the L-quantities at θ, in float64, with this operator's λ and mask: L and
        :math:`\nabla L` from the first-order pass, :math:`m\odot\theta` (:class:`~.objective.Objective`;
        ``objective().at(λ')`` for another λ)."""
        theta = self.flat_params().double()
        decayed = torch.zeros_like(theta)
        for sl in self._decay_runs:
            decayed[sl] = theta[sl]
        return Objective(lam=self.lam, loss_L=self.data_loss(), theta=decayed, grad_L=self.data_grad().double(),
                         vectors=self.vectors)

    def data_hessian(self) -> DataHessian:
        r"""The operator :math:`\nabla^2L` alone (:class:`DataHessian`, a view of this one)."""
        return DataHessian(self)

    def grad(self) -> Tensor:
        r""":math:`\nabla F(\theta) = \nabla L + \lambda\, m\odot\theta`, flat."""
        g = self.data_grad()
        self._add_regularizer(g, self.flat_params())
        return g

    def matvec(self, v: Tensor) -> Tensor:
        r""":math:`\nabla^2F\,v` for a flat ``v`` (this process's part: ``vectors.local_dim`` entries)."""
        return self._products(self._as_row(v))[0]

    def matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2F\,v_i` of a ``(k, local_dim)`` block (in ``dtype``, or V's if wider and λ ≠ 0)."""
        return self._products(self._as_block(V))

    # ------------------------------------------------------------- helpers
    def _as_row(self, v: Tensor) -> Tensor:
        """A checked flat vector as a ``(1, local_dim)`` block on ``device`` (in its own dtype)."""
        n = self.vectors.local_dim
        if v.shape != (n,):
            raise ValueError(f"expected a vector of shape ({n},), got {tuple(v.shape)}")
        return v.to(device=self.device).unsqueeze(0)

    def _as_block(self, V: Tensor) -> Tensor:
        """A checked ``(k, local_dim)`` block on ``device`` (in its own dtype)."""
        n = self.vectors.local_dim
        if V.ndim != 2 or V.shape[1] != n:
            raise ValueError(f"expected a (k, {n}) block, got {tuple(V.shape)}")
        return V.to(device=self.device)

    def _products(self, V: Tensor, *, regularised: bool = True) -> Tensor:
        r"""∇²L V in ``dtype``; with ``regularised``, + λ m⊙V in the wider of ``dtype`` and
        V's (a float64 Lanczos vector keeps its λ-term exact, as :math:`\nabla^2L\,v + \lambda v`
        summed by the caller would)."""
        HV = self._data_matmat(V.to(self.dtype))
        self.products += V.shape[0]
        if regularised and self.lam:
            HV = HV.to(torch.promote_types(HV.dtype, V.dtype))
            self._add_regularizer(HV, V)
        return HV

    def _add_regularizer(self, out: Tensor, V: Tensor) -> None:
        """out += λ m⊙V in place (rows of a block, or one vector)."""
        if self.lam:
            for sl in self._decay_runs:
                out[..., sl] += self.lam * V[..., sl]  # the product, then the sum: as ∇²L v + λv

    def _views(self, flat: Tensor) -> list[Tensor]:
        """Per-tensor views (no copy) of a flat vector, shaped like this process's tensors."""
        sizes = [s.numel() for s in self._local_shapes]
        return [c.view(s) for c, s in zip(torch.split(flat, sizes), self._local_shapes)]

    def _split_rows(self, V: Tensor) -> list[Tensor]:
        """Per-tensor parts of a ``(k, ·)`` block, shaped ``(k, *shape)``."""
        sizes = [s.numel() for s in self._local_shapes]
        return [c.reshape(V.shape[0], *s) for c, s in zip(torch.split(V, sizes, dim=-1), self._local_shapes)]


class DataHessian:
    r""":math:`\nabla^2L` of a :class:`HessianOperator`: its products without the regulariser's
    :math:`\lambda\,m\odot v`, for numbers deliberately about L alone (tr ∇²L; ΔF adds the
    exact λ·Σm). A view, not a copy: the parameters, gradient graph, layout and count of
    products are the operator's, and every attribute it does not define (``dim``,
    ``vectors``, ``release``, ``builds``…) is read from it.

    ``H.matvec(v) - H.data_hessian().matvec(v)`` is :math:`\lambda\,m\odot v` (tests/curvature/test_objective.py).
    """

    #: What belongs to F, not to ∇²L: read it from ``hessian``.
    OF_F = ("lam", "loss", "grad", "objective", "data_hessian")

    def __init__(self, hessian: HessianOperator):
        self.hessian = hessian

    def __getattr__(self, name: str):
        if name == "hessian" or name in self.OF_F:
            raise AttributeError(f"DataHessian (∇²L) has no {name!r}: it belongs to F, read it from .hessian")
        return getattr(self.hessian, name)

    def matvec(self, v: Tensor) -> Tensor:
        r""":math:`\nabla^2L\,v` for a flat ``v``."""
        return self.hessian._products(self.hessian._as_row(v), regularised=False)[0]

    def matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2L\,v_i` of a ``(k, local_dim)`` block."""
        return self.hessian._products(self.hessian._as_block(V), regularised=False)
