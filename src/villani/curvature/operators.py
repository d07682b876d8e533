r"""Symmetric linear operators given as matrix-vector products on flat vectors.

A *linear operator* here is anything with

- ``dim: int`` — the operator acts on :math:`\mathbb{R}^{\text{dim}}`, and
- ``matvec(v) -> A v`` for a 1-D tensor ``v`` of length ``dim``,

optionally ``matmat(V) -> V A`` for a ``(k, dim)`` block of row vectors (``A`` is
symmetric, so the rows of the result are :math:`A v_i`), optionally ``dtype`` /
``device`` attributes telling the estimators where to put their probe vectors, and
optionally ``vectors``: how its vectors are laid out (:func:`operator_vectors`).
Estimators (Hutchinson, Hutch++, Lanczos, SLQ) are free functions that only use this
protocol, so the same code runs on a dense test matrix and on the Hessian of a
transformer.

**Vector layout.** By default a process holds whole vectors (:class:`LocalVectors`). An
operator whose vectors are sharded across processes (:mod:`.sharded_vectors`) sets
``vectors`` to an object with the same methods: ``local_dim`` (entries held here),
``sum`` (add up per-process partial sums), ``dot``/``norm``/``amax`` (global inner
products, norms, largest entry),
``probes`` (this process's part of the single-process probe stream) and ``local_index``
(a block of global coordinates in local coordinates). The estimators reduce every
coordinate sum through it, so they run unchanged on sharded vectors, and on whole
vectors the layout adds nothing (sums pass through, ``dot``/``norm`` are
``torch.dot``/``torch.linalg.vector_norm``).

Example:
    >>> import torch
    >>> A = torch.diag(torch.arange(1.0, 5.0, dtype=torch.float64))
    >>> op = DenseOperator(A)
    >>> op.matvec(torch.ones(4, dtype=torch.float64)).tolist()
    [1.0, 2.0, 3.0, 4.0]
    >>> op2 = as_operator(lambda v: 2 * v, 3)
    >>> op2.matvec(torch.ones(3)).tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from .probes import ProbeStream

__all__ = [
    "LinearOperator",
    "HessianOperator",
    "DenseOperator",
    "CallableOperator",
    "ShiftedOperator",
    "as_operator",
    "apply_rows",
    "operator_dtype",
    "operator_device",
    "LocalVectors",
    "operator_vectors",
]


@runtime_checkable
class LinearOperator(Protocol):
    """Structural type of a symmetric linear operator on flat vectors."""

    dim: int

    def matvec(self, v: Tensor) -> Tensor:
        """Return :math:`A v` for a 1-D tensor ``v`` of length ``dim``."""


@runtime_checkable
class HessianOperator(Protocol):
    r"""Structural type of the Hessian :math:`\nabla^2F` of a model's regularised token loss
    :math:`F(\theta) = L(\theta) + \frac\lambda2\|m\odot\theta\|^2` at fixed parameters, as
    the measurement uses it: a symmetric :class:`LinearOperator` on flat parameter vectors
    (an operator's ``vectors``, where it has one, says how they are laid out: whole, or this
    process's shards) plus the
    first-order quantities measured beside the curvature. :class:`~.model_hessian.ModelHessian`,
    :class:`~.data_parallel_hessian.DataParallelHessian` and
    :class:`~.finite_difference_hessian.FiniteDifferenceHessian` implement it (checked by
    ``tests/curvature/test_hessian_protocol.py``). Vectors below are in ``vectors``' layout."""

    dim: int
    dtype: torch.dtype
    device: torch.device
    names: list[str]  # parameter tensors, in flat-vector order
    decay_names: list[str]  # those λ applies to (m = 1)
    num_tokens: int  # N, predicted tokens over all batches
    lam: float

    def matvec(self, v: Tensor) -> Tensor:
        r""":math:`\nabla^2F\,v`."""

    def matmat(self, V: Tensor) -> Tensor:
        r"""Rows :math:`\nabla^2F\,v_i` of a ``(k, ·)`` block."""

    def param_blocks(self) -> dict[str, slice]:
        """``{name: slice}``: each parameter tensor's part of the (global) flat vector."""

    def flat_params(self) -> Tensor:
        r""":math:`\theta`, detached."""

    def decay_mask(self) -> Tensor:
        """The 0/1 mask m."""

    def theta_sq_norm(self) -> float:
        r""":math:`\|m\odot\theta\|^2`."""

    def data_loss(self) -> float:
        """L(θ), the mean token cross-entropy."""

    def loss(self) -> float:
        """F(θ)."""

    def data_grad(self) -> Tensor:
        r""":math:`\nabla L(\theta)`."""

    def grad(self) -> Tensor:
        r""":math:`\nabla F(\theta) = \nabla L + \lambda\, m\odot\theta`."""

    def release(self) -> None:
        """Free what is kept between products (graphs, buffers); the next product rebuilds it."""


class DenseOperator:
    r"""A symmetric matrix :math:`A \in \mathbb{R}^{n\times n}` held densely.

    Used as the exact reference in tests: its trace, Frobenius norm and spectrum are
    known in closed form, so every estimator can be checked against it.

    Args:
        matrix: square 2-D tensor; symmetric to a relative tolerance of √eps(dtype).
    """

    def __init__(self, matrix: Tensor):
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"DenseOperator needs a square matrix, got {tuple(matrix.shape)}")
        tol = float(matrix.abs().max()) * torch.finfo(matrix.dtype).eps ** 0.5
        if float((matrix - matrix.T).abs().max()) > tol:
            raise ValueError("DenseOperator needs a symmetric matrix")
        self.matrix = matrix
        self.dim = int(matrix.shape[0])
        self.dtype = matrix.dtype
        self.device = matrix.device

    def matvec(self, v: Tensor) -> Tensor:
        """Return :math:`A v`."""
        return self.matrix @ v

    def matmat(self, V: Tensor) -> Tensor:
        """Return the rows :math:`A v_i` of a ``(k, dim)`` block, i.e. :math:`V A`."""
        return V @ self.matrix


class CallableOperator:
    """A linear operator from a plain ``matvec`` callable and its dimension.

    Args:
        fn: ``v -> A v`` on 1-D tensors of length ``dim``.
        dim: dimension of the space.
        dtype: dtype of probe vectors (default ``torch.get_default_dtype()``).
        device: device of probe vectors (default CPU).
        matmat: optional batched form ``V (k, dim) -> rows A v_i``.
        vectors: the vector layout, when ``fn`` acts on sharded vectors (e.g. the
            ``vectors`` of the sharded operator it wraps); default whole vectors.
    """

    def __init__(
        self,
        fn: Callable[[Tensor], Tensor],
        dim: int,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        matmat: Callable[[Tensor], Tensor] | None = None,
        vectors=None,
    ):
        if int(dim) <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self._fn = fn
        self._matmat = matmat
        self.vectors = vectors
        self.dim = int(dim)
        self.dtype = dtype if dtype is not None else torch.get_default_dtype()
        self.device = torch.device(device) if device is not None else torch.device("cpu")

    def matvec(self, v: Tensor) -> Tensor:
        """Return :math:`A v`."""
        return self._fn(v)

    def matmat(self, V: Tensor) -> Tensor:
        """Return the rows :math:`A v_i` of a ``(k, dim)`` block."""
        if self._matmat is not None:
            return self._matmat(V)
        return torch.stack([self._fn(v) for v in V])


class ShiftedOperator:
    r"""The shifted operator :math:`A + \sigma I`.

    Its eigenvectors are those of :math:`A` with every eigenvalue moved by :math:`\sigma`,
    and :math:`\operatorname{tr}(A+\sigma I) = \operatorname{tr}A + \sigma\,\text{dim}`.
    The Hessian of :math:`F = L + \frac\lambda2\|\theta\|^2` is the Hessian of
    :math:`L` shifted by :math:`\lambda`, so its spectrum is measured on
    ``ShiftedOperator(hessian_of_L, lam)``.

    Args:
        op: a linear operator (``dim`` + ``matvec``, optionally ``matmat``), square
            tensor, or ``(callable, dim)`` pair.
        shift: :math:`\sigma`.

    Example:
        >>> import torch
        >>> op = ShiftedOperator(torch.eye(2, dtype=torch.float64), 3.0)
        >>> op.matvec(torch.ones(2, dtype=torch.float64)).tolist()
        [4.0, 4.0]
    """

    def __init__(self, op, shift: float):
        self.base = as_operator(op)
        self.shift = float(shift)
        self.dim = self.base.dim
        self.dtype = operator_dtype(self.base)
        self.device = operator_device(self.base)
        self.vectors = operator_vectors(self.base)  # sharded bases stay sharded

    def matvec(self, v: Tensor) -> Tensor:
        r"""Return :math:`Av + \sigma v`."""
        return self.base.matvec(v) + self.shift * v

    def matmat(self, V: Tensor) -> Tensor:
        r"""Return the rows :math:`Av_i + \sigma v_i` of a ``(k, dim)`` block."""
        return apply_rows(self.base, V) + self.shift * V


def as_operator(op, dim: int | None = None, **kwargs) -> LinearOperator:
    """Coerce ``op`` into a linear operator.

    Accepts an object that already has ``dim`` and ``matvec`` (returned unchanged), a
    square tensor (wrapped in :class:`DenseOperator`), a callable together with
    ``dim``, or a ``(callable, dim)`` pair (both wrapped in :class:`CallableOperator`;
    ``kwargs`` are passed on).
    """
    if isinstance(op, tuple) and len(op) == 2 and callable(op[0]) and dim is None:
        op, dim = op
    if isinstance(op, Tensor):
        return DenseOperator(op)
    if hasattr(op, "matvec") and hasattr(op, "dim"):
        return op
    if callable(op):
        if dim is None:
            raise TypeError("a callable operator needs its dimension: as_operator(fn, dim)")
        return CallableOperator(op, dim, **kwargs)
    raise TypeError(f"cannot make a linear operator from {type(op).__name__}")


def operator_dtype(op) -> torch.dtype:
    """The dtype probes for ``op`` should have (its ``dtype`` or the default dtype)."""
    return getattr(op, "dtype", None) or torch.get_default_dtype()


def operator_device(op) -> torch.device:
    """The device probes for ``op`` should live on (its ``device`` or CPU)."""
    device = getattr(op, "device", None)
    return torch.device(device) if device is not None else torch.device("cpu")


def apply_rows(op, V: Tensor) -> Tensor:
    """Apply ``op`` to every row of ``V`` (``(k, dim)``), batched when ``op`` can.

    Uses ``op.matmat`` when present, else one ``matvec`` per row.
    """
    if V.shape[0] == 1:
        return op.matvec(V[0]).unsqueeze(0)
    matmat = getattr(op, "matmat", None)
    if matmat is not None:
        return matmat(V)
    return torch.stack([op.matvec(v) for v in V])


class LocalVectors:
    """Whole vectors of length ``dim`` held by this process (the default layout).

    Every method is the plain single-process operation, so an estimator written against
    this interface computes exactly what it computed before the interface existed.
    """

    def __init__(self, dim: int):
        self.dim = self.local_dim = int(dim)

    def sum(self, partial: Tensor) -> Tensor:
        """Partial coordinate sums are already total sums: returned as they are."""
        return partial

    def dot(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\langle a, b\rangle` (``torch.dot``)."""
        return torch.dot(a, b)

    def norm(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|` (``torch.linalg.vector_norm``)."""
        return torch.linalg.vector_norm(a)

    def amax(self, a: Tensor) -> Tensor:
        r""":math:`\|a\|_\infty`."""
        return a.abs().max()

    def probes(self, seed: int, *, dtype: torch.dtype, device: torch.device) -> ProbeStream:
        """The Rademacher probe stream of ``seed`` (:class:`~.probes.ProbeStream`)."""
        return ProbeStream(self.dim, seed, dtype=dtype, device=device)

    def local_index(self, index):
        """A block's index (slice or index tensor), unchanged."""
        return index


def operator_vectors(op):
    """How ``op``'s vectors are laid out: its ``vectors`` attribute, else
    :class:`LocalVectors` of length ``op.dim``."""
    vectors = getattr(op, "vectors", None)
    return vectors if vectors is not None else LocalVectors(op.dim)
