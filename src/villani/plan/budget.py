r"""What one measure job may spend: the most Hessian-vector products, by phase.

A measure job of checkpoint ``step`` (of the run's checkpoint ``steps``) runs, on the whole
measurement set,

- at a checkpoint with a spectrum (:func:`~villani.plan.schedule.spectrum_at`,
  ``measure.spectrum_every``): the top-k Lanczos run, :math:`\ell` = ``measure.lanczos_steps``
  products (fewer with ``measure.lanczos_tol``), and the SLQ density, whose first start is
  that run: :math:`(p-1)\,s` more products for p starts of s = ``measure.slq_steps``;
- at every checkpoint the trace: at most M = ``measure.num_probes`` probes (Stein's rule
  stops at or below it; the doubly stochastic trace draws at most the groups that spend
  the same tokens, :func:`ds_group_cap`),

so at most

.. math::  K = [\text{spectrum}]\,\big(\ell + (p-1)\,s\big) + M

products (:func:`budget`, the one place of this formula). p is ``measure.slq_probes``, or
with ``measure.slq_cdf_tol`` the fewest starts that tolerance needs at dimension d
(:func:`~villani.curvature.slq_num_starts`), except at the checkpoints
``measure.full_density`` keeps whole (:func:`slq_starts`). The measure job's progress
total, its phases' totals (:mod:`villani.measure.curvature_phase`), a cluster job's
runtime (:mod:`villani.dag.resources`) and the planned counts of the cost model
(:mod:`villani.measure.cost_model`) are all this :class:`Budget`. Pure functions of the
``measure`` parameters; importing this module imports no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from villani.curvature.spectrum.density import slq_num_starts
from villani.plan.frozen import Params
from villani.plan.schedule import spectrum_at

__all__ = ["Budget", "budget", "checkpoint_budget", "slq_starts", "ds_groups", "ds_group_cap"]


@dataclass(frozen=True)
class Budget:
    """The most products of one measure job on the whole measurement set, by phase.

    Attributes:
        lanczos: the top-k run's steps (0 at a checkpoint without a spectrum).
        slq: the SLQ starts after the first × ``measure.slq_steps`` (0 without a spectrum).
        trace: ``measure.num_probes``, the most trace probes.
        slq_starts: p, the SLQ starts (the first is the top-k run).
        full_density: whether p is ``measure.slq_probes`` as asked (not cut by ``slq_cdf_tol``).
    """

    lanczos: int
    slq: int
    trace: int
    slq_starts: int
    full_density: bool = True

    @property
    def spectrum(self) -> int:
        """The spectrum's products: the top-k run and the SLQ starts after the first."""
        return self.lanczos + self.slq

    @property
    def total(self) -> int:
        r"""K, the most products of the job."""
        return self.spectrum + self.trace


def budget(me: Params, *, spectrum: bool, slq_starts: int, full_density: bool = True,
           trace: int | None = None) -> Budget:
    r"""The :class:`Budget` of ``measure`` settings ``me`` with ``slq_starts`` SLQ starts, at a
    checkpoint with (``spectrum``) or without the top-k run and the density:
    :math:`K = [\text{spectrum}](\ell + (p-1)s) + M`, M = ``trace`` (default
    ``measure.num_probes``; a plan may count fewer, the probes Stein's rule is expected to take)."""
    lanczos = me.lanczos_steps if spectrum else 0
    slq = (slq_starts - 1) * me.slq_steps if spectrum else 0
    trace = me.num_probes if trace is None else trace
    return Budget(lanczos, slq, trace, slq_starts, full_density)


def slq_starts(me: Params, d: int, step: int, steps: list[int]) -> tuple[int, bool]:
    """(SLQ starts at checkpoint ``step`` of a model of ``d`` parameters, whether it is a
    full-density checkpoint): ``measure.slq_probes``, or with ``measure.slq_cdf_tol`` the
    fewest starts it needs (at most ``slq_probes``) except where ``measure.full_density``
    (``every``, ``ends``: the first and last checkpoint, ``never``) keeps them all."""
    full = {"every": True, "ends": step in (steps[0], steps[-1]), "never": False}[me.full_density]
    if me.slq_cdf_tol is None or full:
        return me.slq_probes, True
    return min(me.slq_probes, slq_num_starts(d, me.slq_cdf_tol)), False


def checkpoint_budget(me: Params, d: int, step: int, steps: list[int]) -> Budget:
    """The :class:`Budget` of the measure job of checkpoint ``step`` of ``steps`` for a model
    of ``d`` parameters: its spectrum (``measure.spectrum_every``) and SLQ starts (:func:`slq_starts`)."""
    starts, full = slq_starts(me, d, step, steps)
    return budget(me, spectrum=spectrum_at(me.spectrum_every, step, steps), slq_starts=starts,
                  full_density=full)


def ds_groups(probes: int, per_group: int) -> int:
    """Groups of ``per_group`` probes that hold ``probes`` probes (rounded up, ≥ 2)."""
    return max(2, math.ceil(probes / max(1, per_group)))


def ds_group_cap(num_probes: int, n_blocks: int, blocks: int, per_group: int) -> int:
    """The most doubly stochastic groups a job may draw: ``measure.num_probes`` counts whole-set
    products, and a group of ``per_group`` products on ``blocks`` of the ``n_blocks`` blocks
    costs ``per_group·blocks/n_blocks`` of them — so ⌈num_probes·n/(b·k)⌉ groups (≥ 2), the
    same tokens as num_probes products on the whole set."""
    return max(2, math.ceil(num_probes * n_blocks / (blocks * max(1, per_group))))
