r"""Top eigenvalues and the SLQ spectral density from one set of Lanczos runs.

SLQ start ``j`` is the Rademacher vector :math:`v_j` = Hutchinson probe ``j`` of the
probe seed (as in :func:`villani.curvature.slq`), so :math:`d\,\alpha_1^{(j)} =
v_j^\top A v_j` reproduces Hutchinson sample ``j`` — a free consistency check.

**Reuse.** The Lanczos run from start 0 has ``lanczos_steps`` steps and serves twice:
its Ritz values are the top-k eigenvalues (with Ritz residuals
:math:`\beta_m|s_{m,i}|` as error bars) *and* its Gauss quadrature is SLQ's first
node/weight set. That is exactly what :func:`villani.curvature.top_eigenvalues` computes
from a Rademacher start (full re-orthogonalisation); the Krylov space of a random start
contains every eigen-direction, and extreme eigenvalues converge first. Starts
1..``slq_probes``−1 run ``slq_steps`` steps each. Total cost:
``lanczos_steps + (slq_probes − 1)·slq_steps`` operator products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from villani.curvature import SpectralDensity, lanczos
from villani.curvature.probes import rademacher_rows

__all__ = ["Spectrum", "lanczos_spectrum"]


@dataclass(frozen=True, eq=False)
class Spectrum:
    """Top eigenvalues (largest first) with residuals, and the SLQ density."""

    top_eigenvalues: np.ndarray
    top_residuals: np.ndarray
    density: SpectralDensity
    num_matvecs: int
    breakdown: bool

    @property
    def lambda_median(self) -> float:
        """Median of the spectral measure (SLQ quadrature, quantile 0.5)."""
        return self.density.quantile(0.5)


def lanczos_spectrum(op, *, top_k: int, lanczos_steps: int, slq_probes: int, slq_steps: int,
                     seed: int) -> Spectrum:
    """Top-``top_k`` Ritz pairs from start 0 and SLQ over ``slq_probes`` starts (see module doc)."""
    starts = rademacher_rows(slq_probes, op.dim, seed, dtype=op.dtype, device=op.device)
    nodes, weights, traces = [], [], []
    top = res0 = None
    matvecs, breakdown = 0, False
    for j in range(slq_probes):
        res = lanczos(op, lanczos_steps if j == 0 else slq_steps, v0=starts[j])
        theta, s = res.ritz()
        nodes.append(theta)
        weights.append(s[0, :] ** 2)
        traces.append(op.dim * float(res.alphas[0]))
        matvecs += res.num_matvecs
        breakdown |= res.breakdown
        if j == 0:
            order = np.argsort(theta)[::-1][:top_k]
            top = (theta[order].copy(), np.abs(res.beta_last * s[-1, order]))
            res0 = res
    assert top is not None and res0 is not None
    density = SpectralDensity(nodes=tuple(nodes), weights=tuple(weights),
                              trace_samples=np.asarray(traces, dtype=np.float64), dim=op.dim, num_matvecs=matvecs)
    return Spectrum(top_eigenvalues=top[0], top_residuals=top[1], density=density, num_matvecs=matvecs,
                    breakdown=breakdown)
