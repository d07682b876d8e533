r"""Doubly stochastic Hutchinson: fresh measurement blocks per group of probes.

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

**Per-coordinate-block traces** (``coordinates=``, e.g. ``ModelHessian.param_blocks()``):
the same argument holds for every :math:`v_c^\top (H_B v)_c`, so the group means of the
per-tensor quadratic forms are i.i.d. and unbiased for :math:`\operatorname{tr} H_{cc}`
(``coordinate_samples``, one row per group).

**A CI target** (``target=``, :mod:`.two_stage`): the group means are the
samples of Stein's two-stage rule — a pilot of ``target.min_probes`` groups decides how
many groups (at most ``groups``) to draw, and the interval is Stein's.

What it does *not* give: :math:`E\|H_B v\|^2 = E\|H_B\|_F^2 \ge \|H\|_F^2` (the
between-block spread adds to it), so no unbiased :math:`\|H\|_F^2` and no predicted
variance of plain Hutchinson; ``sq_samples`` keeps the :math:`\|H_B v\|^2` for what they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from scipy import stats

from ..probes import ProbeStream
from .estimate import TraceEstimate, summarize_samples
from .two_stage import CITarget, two_stage_half_width, two_stage_size

__all__ = ["DoublyStochasticTrace", "doubly_stochastic_trace", "group_blocks"]


@dataclass(frozen=True, eq=False)
class DoublyStochasticTrace:
    """Estimate of tr H from J groups of k probes on b of n blocks each.

    ``samples``: (J, k) values vᵀH_Bv; ``blocks``: (J, b) block indices of each group;
    ``sq_samples``: (J, k) ‖H_B v‖²; ``coordinate_names`` / ``coordinate_samples``: the
    per-coordinate-block group means (J, C), or ``()`` / None; ``max_groups`` the most
    groups the call could draw; ``pilot`` the groups of a CI target's first stage (None
    without a target) and ``target_half_width`` its half-width.
    """

    samples: np.ndarray
    blocks: np.ndarray
    n_blocks: int
    sq_samples: np.ndarray | None = None
    coordinate_names: tuple[str, ...] = ()
    coordinate_samples: np.ndarray | None = None
    max_groups: int | None = None
    pilot: int | None = None
    target_half_width: float | None = None

    @property
    def num_groups(self) -> int:
        return int(self.samples.shape[0])

    @property
    def probes_per_group(self) -> int:
        return int(self.samples.shape[1])

    @property
    def blocks_per_group(self) -> int:
        return int(self.blocks.shape[1])

    @property
    def num_matvecs(self) -> int:
        return self.num_groups * self.probes_per_group

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
        """t interval over the J group means (between-block variance included); with a CI
        target Stein's two-stage interval over them."""
        if self.pilot is not None:
            h = two_stage_half_width(self.group_means, self.pilot)
        else:
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

    def as_trace_estimate(self) -> TraceEstimate:
        """The group means as the samples of a :class:`~villani.curvature.TraceEstimate`
        (its mean, std, stderr and CI are those over groups; the per-coordinate group means
        its block samples); ``frob_sq`` and ``diag_sq`` None (module docstring),
        ``max_probes`` the most groups."""
        g = self.group_means
        mean, std, stderr, _ = summarize_samples(g)
        names, cs = self.coordinate_names, self.coordinate_samples
        blocks = {}
        if names:
            blocks = dict(block_names=names, block_samples=cs,
                          block_means={n: float(cs[:, j].mean()) for j, n in enumerate(names)},
                          block_stderr={n: summarize_samples(cs[:, j])[2] for j, n in enumerate(names)})
        return TraceEstimate(mean=mean, std=std, stderr=stderr, ci95=self.ci95, samples=g,
                             num_matvecs=self.num_matvecs, method="doubly stochastic hutchinson",
                             max_probes=self.max_groups, target_half_width=self.target_half_width, **blocks)


def group_blocks(n_blocks: int, blocks: int, seed: int, group: int) -> np.ndarray:
    """The ``blocks`` block indices (sorted, distinct) of group ``group``: a function of (seed, group) only."""
    if not 1 <= blocks <= n_blocks:
        raise ValueError(f"blocks per group: {blocks} is invalid (expected 1..{n_blocks}, the measurement blocks)")
    return np.sort(np.random.default_rng((int(seed), int(group))).choice(n_blocks, size=blocks, replace=False))


def doubly_stochastic_trace(operator_for: Callable[[Sequence[int]], object], n_blocks: int, *, groups: int,
                            blocks: int, probes: int, seed: int,
                            coordinates: Mapping[str, slice] | None = None, target: CITarget | None = None,
                            callback: Callable[..., None] | None = None) -> DoublyStochasticTrace:
    """tr H by J = ``groups`` groups of k = ``probes`` probes, each on ``blocks`` fresh blocks.

    ``operator_for(indices)`` returns the operator :math:`H_B` of those blocks (``dim``,
    ``dtype``/``device`` or their first parameter's, and ``matmat`` — one call per group,
    so a Hessian that rebuilds its graph per call builds it once for k products; an
    operator with a ``release()`` method is released after its call).
    ``coordinates``: name → slice of the coordinates, for per-block traces from the same
    products. ``target``: Stein's two-stage rule over the group means (``groups`` the most,
    ``target.min_probes`` the pilot's groups). ``callback(products_done, products_planned,
    group_means)`` after each group.
    """
    if groups < 2 or probes < 1:
        raise ValueError(f"groups: {groups}, probes: {probes} are invalid (expected groups ≥ 2, probes ≥ 1)")
    named = list((coordinates or {}).items())
    samples, means, chosen, sq, coords = [], [], [], [], []

    def run_group(j: int, planned: int) -> None:
        idx = group_blocks(n_blocks, blocks, seed, j)
        op = operator_for([int(i) for i in idx])
        V = ProbeStream(op.dim, _probe_seed(seed, j), dtype=op.dtype, device=op.device).next(probes)
        HV = op.matmat(V)
        if hasattr(op, "release"):
            op.release()
        D = V * HV
        samples.append(D.sum(dim=1, dtype=torch.float64).cpu().numpy())
        means.append(float(samples[-1].mean()))
        sq.append((HV * HV).sum(dim=1, dtype=torch.float64).cpu().numpy())
        if named:
            coords.append(np.array([float(D[:, sl].sum(dtype=torch.float64)) / probes for _, sl in named]))
        chosen.append(idx)
        if callback is not None:
            callback(len(samples) * probes, planned * probes, np.asarray(means))

    pilot = groups if target is None else min(max(2, target.min_probes), groups)
    for j in range(pilot):
        run_group(j, groups)
    total = pilot if target is None else two_stage_size(np.asarray(means), target, groups)
    for j in range(pilot, total):
        run_group(j, total)
    return DoublyStochasticTrace(
        np.stack(samples), np.stack(chosen), int(n_blocks), sq_samples=np.stack(sq),
        coordinate_names=tuple(n for n, _ in named), coordinate_samples=np.stack(coords) if named else None,
        max_groups=int(groups), pilot=None if target is None else int(pilot),
        target_half_width=None if target is None else float(target.half_width(float(np.mean(means)))))


def _probe_seed(seed: int, group: int) -> int:
    """The probe seed of group j: distinct per (seed, j), independent of the block draw's stream."""
    return int(np.random.SeedSequence((int(seed), int(group), 1)).generate_state(1)[0])
