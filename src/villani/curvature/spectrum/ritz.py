r"""The records of a Lanczos run: :class:`LanczosResult` (the tridiagonal :math:`T_m`, and
optionally the basis and the last residual) and :class:`EigenResult` (Ritz values with
their residual norms, largest first), frozen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh_tridiagonal
from torch import Tensor

__all__ = ["LanczosResult", "EigenResult"]


@dataclass(frozen=True, eq=False)
class LanczosResult:
    r"""Outcome of ``m`` Lanczos steps: :math:`A Q_m = Q_m T_m + \beta_m q_{m+1} e_m^\top`.

    Attributes:
        alphas: diagonal of :math:`T_m`, shape ``(m,)``, float64.
        betas: off-diagonal of :math:`T_m`, shape ``(m-1,)``, float64; an exact zero
            marks a restart after breakdown (an invariant subspace was found).
        beta_last: :math:`\beta_m`, the norm of the residual after the last step;
            the Ritz residual of eigenpair ``i`` is :math:`\beta_m |s_{m,i}|`.
        num_matvecs: operator applications spent (``m``).
        basis: the orthonormal Lanczos vectors ``(m, dim)`` if kept, else None.
        restarts: how many breakdowns were continued with a fresh random vector.
        breakdown: True when the run stopped early on an invariant subspace.
        start_seed: when the run started from the first Rademacher probe of a seed
            (``v0`` not given), that seed — so :func:`~villani.curvature.slq` can reuse the
            run as its first start vector; None for a caller-given ``v0``.
        residual: with the basis, the last unnormalised residual
            :math:`r = \beta_m q_{m+1}`, so that :math:`AQ_m = Q_mT_m + r e_m^\top`
            gives :math:`AQ_m` without further products (:func:`~villani.curvature.deflation_from_lanczos`).
    """

    alphas: np.ndarray
    betas: np.ndarray
    beta_last: float
    num_matvecs: int
    basis: Tensor | None = None
    restarts: int = 0
    breakdown: bool = False
    start_seed: int | None = None
    residual: Tensor | None = None

    @property
    def num_steps(self) -> int:
        """Number of steps m (the size of :math:`T_m`)."""
        return int(self.alphas.size)

    def tridiagonal(self) -> np.ndarray:
        """:math:`T_m` as a dense ``(m, m)`` float64 array."""
        return np.diag(self.alphas) + np.diag(self.betas, 1) + np.diag(self.betas, -1)

    def ritz(self) -> tuple[np.ndarray, np.ndarray]:
        """Eigen-decomposition of :math:`T_m`: ascending Ritz values and eigenvectors (columns)."""
        if self.alphas.size == 1:
            return self.alphas.copy(), np.ones((1, 1))
        return eigh_tridiagonal(self.alphas, self.betas)

    def ritz_residuals(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Ascending Ritz values and their residual norms :math:`\|A y_i - \theta_i y_i\|
        = \beta_m |s_{m,i}|` (exact in exact arithmetic; valid with full
        re-orthogonalisation)."""
        theta, s = self.ritz()
        return theta, np.abs(self.beta_last * s[-1, :])


@dataclass(frozen=True, eq=False)
class EigenResult:
    """Extreme eigenvalue estimates with error bars.

    Attributes:
        values: Ritz values, largest first.
        residuals: Ritz residual norms; each ``values[i]`` is within ``residuals[i]``
            of an eigenvalue of the operator.
        num_matvecs: operator applications spent.
        vectors: Ritz vectors ``(k, dim)`` when requested, else None.
        lanczos: the Lanczos run the values come from (its :math:`T_m` is also a Gauss
            quadrature of the spectral measure at the start vector, see
            :func:`~villani.curvature.slq`'s ``first``).
    """

    values: np.ndarray
    residuals: np.ndarray
    num_matvecs: int
    vectors: Tensor | None = None
    lanczos: LanczosResult | None = None
