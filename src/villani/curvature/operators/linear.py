r"""Symmetric linear operators given as matrix-vector products on flat vectors.

A *linear operator* here is anything with

- ``dim: int`` — the operator acts on :math:`\mathbb{R}^{\text{dim}}`, and
- ``matvec(v) -> A v`` for a 1-D tensor ``v`` of length ``dim``,

optionally ``matmat(V) -> V A`` for a ``(k, dim)`` block of row vectors (``A`` is
symmetric, so the rows of the result are :math:`A v_i`), optionally ``dtype`` /
``device`` attributes telling the estimators where to put their probe vectors, and
optionally ``vectors``: how its vectors are laid out (:mod:`.vectors`).
Estimators (Hutchinson, Hutch++, Lanczos, SLQ) are free functions that only use this
protocol, so the same code runs on a dense test matrix and on the Hessian of a
transformer.

How an operator's vectors are laid out — whole, or sharded across processes — is
:mod:`.vectors`' subject (:func:`~.vectors.operator_vectors`). The model Hessians share
the base class :class:`~.hessian.HessianOperator`.

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

from .vectors import operator_vectors

__all__ = [
    "LinearOperator",
    "DenseOperator",
    "CallableOperator",
    "ShiftedOperator",
    "as_operator",
    "apply_rows",
    "operator_dtype",
    "operator_device",
]


@runtime_checkable
class LinearOperator(Protocol):
    """Structural type of a symmetric linear operator on flat vectors."""

    dim: int

    def matvec(self, v: Tensor) -> Tensor:
        """Return :math:`A v` for a 1-D tensor ``v`` of length ``dim``."""


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
