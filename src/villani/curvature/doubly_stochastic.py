r"""Doubly stochastic Hutchinson: fresh measurement blocks per group of probes (issue 24).

The measurement set is n blocks of equal token count, so its Hessian is the mean of the
blocks' Hessians, :math:`H = \frac1n\sum_b H_b`. Group j draws a uniform sample
:math:`B_j` of b blocks without replacement (``numpy.random.default_rng((seed, j))``)
and k Rademacher probes (:class:`~villani.curvature.probes.ProbeStream` of
``(seed, j)``), and applies the block of k probes to the Hessian of those blocks only,
:math:`H_{B_j} = \frac1b\sum_{b\in B_j} H_b` — one graph build for k products of b/n of
the tokens. Its group mean

.. math::  g_j = \frac1k \sum_{i=1}^k v_{ji}^\top H_{B_j} v_{ji}

is unbiased for tr H: :math:`E[g_j \mid B_j] = \operatorname{tr} H_{B_j}` and
:math:`E[\operatorname{tr} H_{B_j}] = \operatorname{tr} H`. The J group means are i.i.d.,
so the t interval over them, :math:`\bar g \pm t_{0.975,J-1}\, s_g/\sqrt J`, includes
both the probes' and the blocks' (between-block) variance. The one-way decomposition
:math:`s_g^2 = \hat\sigma^2_B + \hat\sigma^2_v/k` (:math:`\hat\sigma^2_v` the mean
within-group sample variance) says which part dominates; :math:`\hat\sigma^2_B` is the
variance of :math:`\operatorname{tr} H_B` at this b
(:func:`villani.measure.cost_model.ds_group_variance` scales it to other b).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from scipy import stats

from .probes import ProbeStream

__all__ = ["DoublyStochasticTrace", "doubly_stochastic_trace", "group_blocks"]


@dataclass(frozen=True)
class DoublyStochasticTrace:
    """Estimate of tr H from J groups of k probes on b of n blocks each.

    ``samples``: (J, k) values vᵀH_Bv; ``blocks``: (J, b) block indices of each group.
    """

    samples: np.ndarray
    blocks: np.ndarray
    n_blocks: int

    @property
    def num_groups(self) -> int:
        return int(self.samples.shape[0])

    @property
    def probes_per_group(self) -> int:
        return int(self.samples.shape[1])

    @property
    def group_means(self) -> np.ndarray:
        return self.samples.mean(axis=1)

    @property
    def mean(self) -> float:
        return float(self.group_means.mean())

    @property
    def stderr(self) -> float:
        return float(self.group_means.std(ddof=1) / math.sqrt(self.num_groups))

    @property
    def ci95(self) -> tuple[float, float]:
        """t interval over the J group means (between-block variance included)."""
        h = float(stats.t.ppf(0.975, self.num_groups - 1)) * self.stderr
        return self.mean - h, self.mean + h

    @property
    def within_var(self) -> float:
        """σ̂²_v: the mean over groups of the probes' sample variance (needs k ≥ 2)."""
        if self.probes_per_group < 2:
            return float("nan")
        return float(self.samples.var(axis=1, ddof=1).mean())

    @property
    def between_var(self) -> float:
        """σ̂²_B = s_g² − σ̂²_v/k: the variance of tr H_B over block samples (can be < 0 by chance)."""
        return float(self.group_means.var(ddof=1) - self.within_var / self.probes_per_group)


def group_blocks(n_blocks: int, blocks: int, seed: int, group: int) -> np.ndarray:
    """The ``blocks`` block indices (sorted, distinct) of group ``group``: a function of (seed, group) only."""
    if not 1 <= blocks <= n_blocks:
        raise ValueError(f"blocks per group: {blocks} is invalid (expected 1..{n_blocks}, the measurement blocks)")
    return np.sort(np.random.default_rng((int(seed), int(group))).choice(n_blocks, size=blocks, replace=False))


def doubly_stochastic_trace(operator_for: Callable[[Sequence[int]], object], n_blocks: int, *, groups: int,
                            blocks: int, probes: int, seed: int, callback: Callable[[int], None] | None = None
                            ) -> DoublyStochasticTrace:
    """tr H by J = ``groups`` groups of k = ``probes`` probes, each on ``blocks`` fresh blocks.

    ``operator_for(indices)`` returns the operator :math:`H_B` of those blocks (``dim``,
    ``dtype``/``device`` or their first parameter's, and ``matmat`` — one call per group,
    so a Hessian that rebuilds its graph per call builds it once for k products).
    ``callback(products_done)`` after each group.
    """
    if groups < 2 or probes < 1:
        raise ValueError(f"groups: {groups}, probes: {probes} are invalid (expected groups ≥ 2, probes ≥ 1)")
    samples, chosen, done = [], [], 0
    for j in range(groups):
        idx = group_blocks(n_blocks, blocks, seed, j)
        op = operator_for([int(i) for i in idx])
        V = ProbeStream(op.dim, _probe_seed(seed, j), dtype=op.dtype, device=op.device).next(probes)
        HV = op.matmat(V)
        samples.append((V * HV).sum(dim=1, dtype=torch.float64).cpu().numpy())
        chosen.append(idx)
        done += probes
        if callback is not None:
            callback(done)
    return DoublyStochasticTrace(np.stack(samples), np.stack(chosen), int(n_blocks))


def _probe_seed(seed: int, group: int) -> int:
    """The probe seed of group j: distinct per (seed, j), independent of the block draw's stream."""
    return int(np.random.SeedSequence((int(seed), int(group), 1)).generate_state(1)[0])
