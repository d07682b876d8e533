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
:func:`~villani.curvature.trace.hutchinson.hutchinson`.

Full re-orthogonalisation matters here: ghost copies of converged outliers would add
spurious quadrature weight at the outliers. On breakdown (an invariant Krylov space) the
quadrature is already exact for that start and the run for it stops.

**Reusing a top-k run.** :func:`~villani.curvature.top_eigenvalues` starts from the first
probe of its seed, so its Lanczos run (``EigenResult.lanczos``) *is* SLQ's start 0 for the
same seed, possibly with more steps; ``first=`` reuses it instead of running start 0
again. If that run restarted after a breakdown, :math:`T` is block-diagonal and the
eigenvectors of the later blocks have zero first component: their nodes carry zero
weight, and the quadrature is still that of the start vector.

**How many starts** a tolerance on the spectral distribution function needs is
:func:`~.density.slq_num_starts` (derivation there).
"""

from __future__ import annotations

import numpy as np
import torch

from ..operators.linear import as_operator, operator_device, operator_dtype
from ..operators.vectors import operator_vectors
from .density import SpectralDensity
from .lanczos import lanczos
from .ritz import LanczosResult

__all__ = ["slq"]


def slq(
    op,
    num_probes: int,
    num_steps: int,
    *,
    seed: int = 0,
    basis_device: torch.device | str | None = None,
    basis_dtype: torch.dtype | None = None,
    first: LanczosResult | None = None,
    callback=None,
) -> SpectralDensity:
    """Stochastic Lanczos quadrature from ``num_probes`` Rademacher starts.

    Args:
        op: a linear operator, square tensor, or ``(callable, dim)`` pair.
        num_probes: number of start vectors.
        num_steps: Lanczos steps per start vector.
        seed: seed of the start vectors (start ``j`` is Hutchinson probe ``j``).
        basis_device, basis_dtype: where/how the Lanczos basis is stored.
        first: a Lanczos run of ``op`` from the first probe of ``seed`` (e.g.
            ``top_eigenvalues(op, k, num_steps=m, seed=seed).lanczos``), used as start 0
            with its own step count; its products are not counted again.
        callback: optional ``callback(done, total, trace_samples)`` after every matvec:
            products done, the products the run will make at most (fewer after a
            breakdown), and the SLQ trace samples n·α₁ of the starts so far.

    Returns:
        A :class:`SpectralDensity` with per-start nodes and weights.
    """
    op = as_operator(op)
    if num_probes < 1:
        raise ValueError(f"num_probes must be ≥ 1, got {num_probes}")
    if first is not None and first.start_seed != int(seed):
        raise ValueError(f"first: the run started from seed {first.start_seed}'s first probe, not seed {seed}'s")
    stream = operator_vectors(op).probes(seed, dtype=operator_dtype(op), device=operator_device(op))
    nodes, weights, traces, matvecs, breakdown = [], [], [], 0, False
    total = (num_probes - (first is not None)) * min(int(num_steps), op.dim)
    for j in range(num_probes):
        v = stream.next(1)[0]
        if j == 0 and first is not None:
            res = first
        else:
            inner = None
            if callback is not None:
                def inner(done, _m, _largest, before=matvecs):
                    callback(before + done, total, np.asarray(traces, dtype=np.float64))
            res = lanczos(op, num_steps, v0=v, basis_device=basis_device, basis_dtype=basis_dtype, callback=inner)
            matvecs += res.num_matvecs
        theta, s = res.ritz()
        nodes.append(theta)
        weights.append(s[0, :] ** 2)
        traces.append(op.dim * float(res.alphas[0]))
        breakdown |= res.breakdown or res.restarts > 0
    return SpectralDensity(
        nodes=tuple(nodes),
        weights=tuple(weights),
        trace_samples=np.asarray(traces, dtype=np.float64),
        dim=op.dim,
        num_matvecs=matvecs,
        breakdown=breakdown,
    )
