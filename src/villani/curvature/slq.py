r"""Stochastic Lanczos quadrature (SLQ) of the spectral density.

The spectral measure of a symmetric :math:`A\in\mathbb R^{n\times n}` with eigenpairs
:math:`(\lambda_i, x_i)` is :math:`\mu = \frac1n\sum_i\delta_{\lambda_i}`, so
:math:`\int f\,d\mu = \operatorname{tr}f(A)/n`. For a unit vector :math:`u`,

.. math::
    u^\top f(A)\,u = \sum_i (x_i^\top u)^2 f(\lambda_i)
    \approx \sum_{k=1}^m \tau_k^2 f(\theta_k),

the m-point Gauss quadrature of the measure :math:`\sum_i (x_i^\top u)^2\delta_{\lambda_i}`
whose nodes :math:`\theta_k` and weights :math:`\tau_k^2` are the eigenvalues of the
Lanczos :math:`T_m` (started at :math:`u`) and the squared first components of its
eigenvectors. It is exact for polynomials of degree ≤ 2m−1. With Rademacher
:math:`v` and :math:`u = v/\sqrt n`, :math:`\mathbb E[n\,u^\top f(A)u]=\operatorname{tr}f(A)`
(Hutchinson), so averaging the quadratures over start vectors estimates :math:`\mu`
(Lin, Saad & Yang 2016; Ghorbani, Krishnan & Xiao 2019).

Each start also yields a free Hutchinson sample :math:`v^\top Av = n\,\alpha_1`
(``trace_samples``): with the same seed these are exactly the samples of
:func:`~villani.curvature.hutchinson.hutchinson`.

Full re-orthogonalisation matters here: ghost copies of converged outliers would add
spurious quadrature weight at the outliers. On breakdown (an invariant Krylov space) the
quadrature is already exact for that start and the run for it stops.
"""

from __future__ import annotations

import numpy as np
import torch

from .lanczos import lanczos
from .operators import as_operator, operator_device, operator_dtype, operator_vectors
from .results import SpectralDensity

__all__ = ["slq"]


def slq(
    op,
    num_probes: int,
    num_steps: int,
    *,
    seed: int = 0,
    basis_device: torch.device | str | None = None,
    basis_dtype: torch.dtype | None = None,
) -> SpectralDensity:
    """Stochastic Lanczos quadrature from ``num_probes`` Rademacher starts.

    Args:
        op: a linear operator, square tensor, or ``(callable, dim)`` pair.
        num_probes: number of start vectors.
        num_steps: Lanczos steps per start vector.
        seed: seed of the start vectors (start ``j`` is Hutchinson probe ``j``).
        basis_device, basis_dtype: where/how the Lanczos basis is stored.

    Returns:
        A :class:`SpectralDensity` with per-start nodes and weights.
    """
    op = as_operator(op)
    if num_probes < 1:
        raise ValueError(f"num_probes must be ≥ 1, got {num_probes}")
    stream = operator_vectors(op).probes(seed, dtype=operator_dtype(op), device=operator_device(op))
    nodes, weights, traces, matvecs = [], [], [], 0
    for _ in range(num_probes):
        v = stream.next(1)[0]
        res = lanczos(op, num_steps, v0=v, basis_device=basis_device, basis_dtype=basis_dtype)
        theta, s = res.ritz()
        nodes.append(theta)
        weights.append(s[0, :] ** 2)
        traces.append(op.dim * float(res.alphas[0]))
        matvecs += res.num_matvecs
    return SpectralDensity(
        nodes=tuple(nodes),
        weights=tuple(weights),
        trace_samples=np.asarray(traces, dtype=np.float64),
        dim=op.dim,
        num_matvecs=matvecs,
    )
