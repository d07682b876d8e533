r"""The curvature part of one checkpoint's measurement (:mod:`villani.measure.measure_stage`).

:func:`curvature`: the top-k Lanczos run of ∇²F (the operator at the run's λ), the
(deflated) Hutchinson trace of ∇²L (its :meth:`~villani.curvature.HessianOperator.data_hessian`:
ΔF = tr ∇²L + λd with λd exact) and the SLQ density, or at a checkpoint without a spectrum (``measure.spectrum_every``)
the trace only — plain Hutchinson on the whole measurement set, or with
``measure.ds_blocks`` the doubly stochastic trace (:func:`ds_curvature`). The trace
products run at ``measure.precision`` and are audited
(:mod:`villani.measure.precision_audit`). :func:`ci_target` turns ``measure`` settings into
the trace's stopping rule, :mod:`villani.plan.budget` into the most products of each phase;
:class:`Clock` times the phases.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
import numpy as np

from villani.curvature import (
    CITarget,
    ModelHessian,
    deflation_from_lanczos,
    hutchinson,
    slq,
    top_eigenvalues,
)
from villani.curvature.trace.doubly_stochastic import doubly_stochastic_trace, group_blocks
from villani.curvature.probes import ProbeStream
from villani.io.finite import check_finite
from villani.measure.precision_audit import AUDIT_PRODUCTS, TracePrecision
from villani.plan.budget import checkpoint_budget, ds_group_cap
from villani.plan.frozen import Params
from villani.plan.schedule import spectrum_at
from villani.runtime.progress import Progress, running_top_eigenvalue, running_trace
from villani.diagnostics.psi import psi_s

__all__ = ["Clock", "ci_target", "curvature", "ds_curvature"]


def ci_target(me: Params, grad_F_sq: float, lam: float, d: int) -> CITarget | None:
    """The CI target of ``measure.trace_rel_ci`` (relative to ``|tr ∇²L|``) and
    ``measure.psi_rel_ci`` (relative to ``|Ψ_s| = |tr ∇²L − (‖∇F‖²/s − λd)|`` for every s:
    ‖∇F‖²/s − λd is Ψ_s at a zero trace), or None."""
    bounds = []
    if me.trace_rel_ci is not None:
        bounds.append((me.trace_rel_ci, 0.0))
    if me.psi_rel_ci is not None:
        bounds += [(me.psi_rel_ci, psi_s(0.0, grad_F_sq, lam, d, s)) for s in me.s_values]
    return CITarget(tuple(bounds), min_probes=me.min_probes) if bounds else None


class Clock:
    """Seconds per phase (``seconds_breakdown``), and the progress bar's phase names."""

    def __init__(self, bar: Progress):
        self.bar, self.t0, self.t = bar, time.perf_counter(), time.perf_counter()
        self.laps: dict[str, float] = {}

    def start(self, name: str, **kw) -> None:
        self.bar.phase(name, **kw)

    def lap(self, name: str) -> None:
        t1 = time.perf_counter()
        self.laps[name] = round(t1 - self.t, 4)
        self.t = t1

    def total(self) -> float:
        self.laps["total_before_write"] = round(time.perf_counter() - self.t0, 4)
        return self.laps["total_before_write"]


def curvature(me: Params, H: ModelHessian, step: int, steps: list[int], grad_F_sq: float, clock: Clock, where: str,
              hessian_L_at, model_type: str, blocks_hessian_L, n_blocks: int) -> dict:
    """The top-k Lanczos run and the SLQ density of ∇²F (``H``, at the run's λ) and the
    (deflated) Hutchinson trace of ∇²L; at a checkpoint without a spectrum
    (``measure.spectrum_every``) the trace only: plain Hutchinson, or with
    ``measure.ds_blocks`` doubly stochastic (:func:`ds_curvature`). The trace products at
    ``measure.precision`` (``hessian_L_at(precision)``: ∇²L's operator there), audited
    (:mod:`villani.measure.precision_audit`); everything else on ``H``, at ``highest``."""
    bar, spectrum = clock.bar, spectrum_at(me.spectrum_every, step, steps)
    if not spectrum and me.ds_blocks is not None:
        return ds_curvature(me, H, grad_F_sq, clock, where, blocks_hessian_L, n_blocks, model_type)
    seed_p, lam, d = me.probe_seed, H.lam, H.dim
    deflate = spectrum and me.trace_estimator == "deflated"
    most = checkpoint_budget(me, d, step, steps)
    m_max = most.trace
    top = density = None
    if spectrum:
        clock.start("lanczos", total=most.total)
        top = top_eigenvalues(H, me.top_k, num_steps=me.lanczos_steps, seed=seed_p, keep_basis=deflate,
                              tol=me.lanczos_tol, callback=bar.counter(0, running_top_eigenvalue))
        clock.lap("lanczos")
    done = top.num_matvecs if spectrum else 0
    # the basis of ∇²F = ∇²L + λI deflates ∇²L: its Ritz values less λ
    deflation = deflation_from_lanczos(top.lanczos, shift=lam) if deflate else None
    clock.start("hutchinson", total=done + m_max + most.slq)
    calls, progress = [0], bar.counter(done, running_trace)

    def counted(*a):  # one call per operator call: one graph build each where the graph is not kept
        calls[0] += 1
        return progress(*a)

    def trace(op):
        est = hutchinson(op, m_max, seed=seed_p, first_probe=1 if deflate else 0, blocks=H.param_blocks(),
                         batch_size=me.probe_block, deflation=deflation,
                         target=ci_target(me, grad_F_sq, lam, d), callback=counted)
        check_finite(est.samples, where, "trace_L samples")
        return est

    prec = TracePrecision(me.precision, H.data_hessian(), hessian_L_at)
    est = trace(prec.recording)
    prec.trace_done()
    clock.lap("hutchinson")
    if spectrum:
        clock.start("slq", total=done + est.num_matvecs + most.slq)
        density = slq(H, most.slq_starts, me.slq_steps, seed=seed_p, first=top.lanczos,
                      callback=bar.counter(done + est.num_matvecs))
        clock.lap("slq")
    clock.start("precision_audit")
    est, audit = prec.settle(est, trace, blocks=H.param_blocks(), model_type=model_type)
    del deflation
    clock.lap("precision_audit")
    kept = H.graph_kept
    H.release()
    products = est.num_matvecs + (top.num_matvecs + density.num_matvecs if spectrum else 0)
    extra = audit["products"] + prec.fallback_products  # spent, not behind a published number
    return dict(top=top, est=est, density=density, deflate=deflate, seed_p=seed_p, full_density=most.full_density,
                graph_kept=kept, products=int(products), spent=int(products + extra),
                # fwd_over_rev reruns forward + backward for every product, blocks or not
                hutchinson_calls=int(est.num_matvecs + extra) if H.method == "fwd_over_rev" else calls[0] + 1,
                hutchinson_products=int(est.num_matvecs + extra), kept_builds=prec.graph_builds(),
                build_seconds=sum(op.build_seconds for op in prec.ops), precision_audit=audit)


def ds_curvature(me: Params, H: ModelHessian, grad_F_sq: float, clock: Clock, where: str, blocks_hessian_L,
                 n_blocks: int, model_type: str) -> dict:
    r"""tr ∇²L at a checkpoint without a spectrum by the doubly stochastic estimator
    (:mod:`villani.curvature.trace.doubly_stochastic`): J groups of k = ``measure.probe_block``
    probes, group j on its own uniform sample of b = ``measure.ds_blocks`` of the n
    measurement blocks (one operator call, one graph build, k products of b/n of the
    tokens); J = ⌈num_probes·n/(b·k)⌉ (≥ 2: the tokens of num_probes whole-set products,
    :func:`~villani.plan.budget.ds_group_cap`), or with a CI target Stein's rule over the group means
    after a pilot of ⌈min_probes/k⌉ (≥ 2) groups. The estimate and its t (Stein) interval
    are over the J i.i.d. group means, so the between-block variance is inside the CI.
    ``blocks_hessian_L(indices, precision)`` is ∇²L of those blocks. The precision audit runs
    on group 0's blocks (the same vectors at the other precision); a failed audit below
    ``highest`` recomputes every group there (with k below the audit's 3 vectors, Rademacher
    vectors of a seed of their own top them up on group 0's blocks). ∇L was made on the whole
    set (``H``), whose graph is released first."""
    seed_p, b, k = me.probe_seed, me.ds_blocks, me.probe_block
    groups = ds_group_cap(me.num_probes, n_blocks, b, k)
    target = ci_target(me, grad_F_sq, H.lam, H.dim)
    if target is not None:
        target = replace(target, min_probes=max(2, math.ceil(target.min_probes / k)))
    kept = H.graph_kept
    H.release()
    ops: list = []  # ∇²L of measurement blocks (DataHessian views)

    def make(idx, precision: str):
        ops.append(blocks_hessian_L(idx, precision))
        return ops[-1]

    idx0 = [int(i) for i in group_blocks(n_blocks, b, seed_p, 0)]
    prec = TracePrecision(me.precision, make(idx0, "highest"), lambda p: make(idx0, p))
    clock.start("hutchinson", total=groups * k)
    progress, latest = clock.bar.counter(0, running_trace), {}

    def trace(first, precision: str):
        pending = [first] if first is not None else []
        est = doubly_stochastic_trace(lambda idx: pending.pop() if pending else make(idx, precision), n_blocks,
                                      groups=groups, blocks=b, probes=k, seed=seed_p,
                                      coordinates=H.param_blocks(), target=target, callback=progress)
        check_finite(est.samples, where, "trace_L samples")
        latest["ds"] = est
        return est.as_trace_estimate()

    est = trace(prec.recording, prec.used)
    topped = AUDIT_PRODUCTS - len(prec.recording.inputs)
    if topped > 0:  # group 0 had fewer probes than the audit multiplies: more Rademacher vectors on its blocks
        rec = prec.recording
        rec.matmat(ProbeStream(rec.dim, _audit_seed(seed_p), dtype=rec.dtype, device=rec.device).next(topped))
    prec.trace_done()
    clock.lap("hutchinson")
    clock.start("precision_audit")
    est, audit = prec.settle(est, lambda _H: trace(None, "highest"), blocks=H.param_blocks(), model_type=model_type)
    clock.lap("precision_audit")
    for op in ops:
        op.release()
    ds = latest["ds"]
    subset_builds = sum(op.builds // len(op.batches) for op in ops)
    extra = audit["products"] + prec.fallback_products + max(topped, 0)
    return dict(top=None, est=est, density=None, deflate=False, seed_p=seed_p, full_density=False, graph_kept=kept,
                products=int(ds.num_matvecs), spent=0, hutchinson_calls=0, hutchinson_products=0,
                kept_builds=int(kept), build_seconds=sum(op.build_seconds for op in [H, *ops]),
                precision_audit=audit, ds=ds,
                subset=dict(products=int(ds.num_matvecs + extra), builds=int(subset_builds),
                            tokens=int(ops[0].num_tokens)))


def _audit_seed(seed: int) -> int:
    """The seed of the audit's top-up vectors: apart from every group's probe stream."""
    return int(np.random.SeedSequence((int(seed), 2**31 - 1)).generate_state(1)[0])
