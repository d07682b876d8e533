r"""The regularised objective at one θ: F and ∇F with λ inside, from the L-quantities.

For a data loss :math:`L`, the 0/1 weight-decay mask :math:`m` and λ,

.. math::
    F(\theta) = L(\theta) + \frac\lambda2\|m\odot\theta\|^2,\qquad
    \nabla F = \nabla L + \lambda\, m\odot\theta,\qquad
    \|\nabla F\|^2 = \|\nabla L\|^2 + 2\lambda\,(m\odot\theta)\cdot\nabla L + \lambda^2\|m\odot\theta\|^2 .

This module is their one home. :meth:`~.hessian.HessianOperator.objective` returns an
:class:`Objective` — L and ∇L from one pass over the data, θ, all in float64 — whose
:attr:`~Objective.F` and :attr:`~Objective.grad_F` carry the operator's λ;
:meth:`Objective.at` gives the same θ's objective at another λ without a new pass (the
radial rays assemble every λ of a point from one). Code that evaluates L without an
operator — a loss surface, a bound's arithmetic — adds the penalty with
:func:`regularised_loss`. A number deliberately about L alone reads the ``*_L`` fields
(``loss_L``, ``grad_L``, ``grad_L_sq``); the operator of ∇²L alone is
:meth:`~.hessian.HessianOperator.data_hessian`.

Sums of squares and inner products go through the operator's vectors (:mod:`.vectors`), so
on sharded vectors every process gets the same numbers. Importing this module imports no
torch.

Example:
    >>> regularised_loss(2.0, 10.0, 0.1)
    2.5
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["Objective", "regularised_loss"]


def regularised_loss(loss_L, theta_sq, lam):
    r""":math:`F = L + \frac\lambda2\|m\odot\theta\|^2` from L and the penalty's squared norm
    :math:`\|m\odot\theta\|^2` (numbers, or tensors that keep their graph)."""
    return loss_L + 0.5 * lam * theta_sq


@dataclass(frozen=True, eq=False)
class Objective:
    r"""F and ∇F at one θ, and the L-quantities they are made of (module docstring).

    Attributes:
        lam: λ.
        loss_L: L(θ).
        theta: :math:`m\odot\theta`, flat float64 (this process's part of it).
        grad_L: :math:`\nabla L(\theta)`, flat float64 (this process's part).
        vectors: the layout of ``theta`` and ``grad_L`` (:mod:`.vectors`): sums go through it.
    """

    lam: float
    loss_L: float
    theta: Tensor
    grad_L: Tensor
    vectors: Any

    def at(self, lam: float) -> Objective:
        """The objective of the same θ at another λ (no new pass over the data)."""
        return replace(self, lam=float(lam))

    def _sq(self, x: Tensor) -> float:
        return float(self.vectors.sum(x.square().sum()))

    @cached_property
    def theta_sq(self) -> float:
        r""":math:`\|m\odot\theta\|^2`."""
        return self._sq(self.theta)

    @cached_property
    def grad_L_sq(self) -> float:
        r""":math:`\|\nabla L\|^2`."""
        return self._sq(self.grad_L)

    @cached_property
    def theta_dot_grad_L(self) -> float:
        r""":math:`(m\odot\theta)\cdot\nabla L`."""
        return float(self.vectors.dot(self.theta, self.grad_L))

    @property
    def F(self) -> float:
        r""":math:`F = L + \frac\lambda2\|m\odot\theta\|^2`."""
        return regularised_loss(self.loss_L, self.theta_sq, self.lam)

    @property
    def grad_F(self) -> Tensor:
        r""":math:`\nabla F = \nabla L + \lambda\,m\odot\theta` (a new float64 vector)."""
        return self.grad_L + self.lam * self.theta

    @cached_property
    def grad_F_sq(self) -> float:
        r""":math:`\|\nabla F\|^2`, summed from :attr:`grad_F` (not the expansion in λ)."""
        return self._sq(self.grad_F)
