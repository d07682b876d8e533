r"""Every measure job audits the precision of its trace products.

``measure.precision`` (:mod:`villani.curvature.operators.precision`: ``highest``, ``tf32``,
``bf16``) is the arithmetic of the **Hutchinson products** — those of tr ∇²L and of what
is built from it (ΔF, Ψ_s, the per-group traces, ‖∇²L‖_F²): the quantities that carry a
statistical error the added rounding can be held against. The top-k Lanczos run and the
SLQ density always run at ``highest``: their error bar is the Ritz residual, 10⁻⁷ and
below at convergence, and bf16 moved 18 of the top-20 by more than 10 % of it
(``docs/curvature.md``). Loss, ∇L and everything first-order stay fp32 too.

**The audit.** The job keeps the first :data:`AUDIT_PRODUCTS` vectors :math:`u_i` its
Hutchinson estimator multiplied (the probes, or :math:`Pv` when deflated) with their
products, and computes the same products at the other precision: at fp32 ``highest`` when
the job's ran cheaper, and in bf16 when they ran at ``highest`` (so every record says
whether a cheaper precision would have been allowed at this checkpoint; bf16's error
bounds TF32's, which rounds operands to 10 mantissa bits instead of 7 and keeps fp32
outputs). With :math:`a_i` the cheaper product, :math:`r_i` the ``highest`` one and
:math:`\delta_i = u_i^\top(a_i - r_i)` the error it adds to one trace sample, it records

- ``rel_product_*``: :math:`\|a_i - r_i\|/\|r_i\|` (max, median);
- ``rel_quadratic_*``: :math:`|\delta_i| / |u_i^\top r_i|` (max, median);
- ``trace_rel_error`` = :math:`\max_i|\delta_i| / |\widehat{\operatorname{tr}}|`: the
  error of the trace estimate if every sample were off by the worst one audited (a
  systematic shift moves the mean by that much; independent errors by ≈ √M less), set
  against ``trace_rel_stderr`` = ``stderr/|tr̂|``, the trace's statistical relative error;
- ``error_over_stderr``: that worst error over the standard error of each quantity it
  enters — ``trace_L`` (and so ΔF and Ψ_s, which differ from it by exact terms),
  the worst of the ``block_traces`` groups (:math:`\delta_{i,g}` summed over the group's
  coordinates, over the group's stderr) and ``frob_sq``
  (:math:`\big|\|a_i\|^2 - \|r_i\|^2\big|` over the stderr of the ‖Hy‖² samples; not
  for a doubly stochastic trace, which estimates no ‖∇²L‖_F²). For a doubly stochastic
  trace the samples are the group means and the audited products those of group 0's blocks;
- ``passed``: every ratio ≤ :data:`AUDIT_FRACTION` (the issue's bar: the added error at
  most 10 % of the statistical one; for the trace, ``trace_rel_error`` ≤ ``bound`` =
  0.1 × ``trace_rel_stderr``).

**The rule.** A job whose trace products ran below ``highest`` and failed publishes no
degraded number: its Hutchinson estimate is recomputed at ``highest`` with the same
probes (``fallback``: the products and seconds that cost; ``used`` becomes
``highest``). ``tf32`` where the device has no TF32 (the CPU) runs at ``highest``
(``note`` says so) and audits bf16, the upper bound. The audit costs
:data:`AUDIT_PRODUCTS` products (one operator call: one graph build, a second graph
only where the job's own products were at ``highest`` and bf16 needs its own).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor

from villani.curvature.operators.precision import effective_precision
from villani.measure.parameter_groups import group_columns
from villani.statistics.samples import sample_stats

__all__ = ["AUDIT_PRODUCTS", "AUDIT_FRACTION", "Recording", "TracePrecision", "audit", "needs_fallback",
           "job_precision"]

#: Hutchinson products audited per job (the first ones the estimator multiplies).
AUDIT_PRODUCTS = 3
#: The bar: the error a cheaper precision adds ≤ this fraction of each quantity's standard error.
AUDIT_FRACTION = 0.1


class Recording:
    """An operator that passes every product to ``op`` and keeps the first ``n`` vectors
    multiplied and their products (copies, in ``op``'s dtype and device)."""

    def __init__(self, op, n: int):
        self.op, self.n = op, int(n)
        self.dim, self.dtype, self.device = op.dim, op.dtype, op.device
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []

    def _keep(self, V: Tensor, HV: Tensor) -> Tensor:
        take = max(0, self.n - len(self.inputs))
        self.inputs += [v.detach().clone() for v in V[:take]]
        self.outputs += [h.detach().clone() for h in HV[:take]]
        return HV

    def matvec(self, v: Tensor) -> Tensor:
        return self._keep(v.unsqueeze(0), self.op.matvec(v).unsqueeze(0))[0]

    def matmat(self, V: Tensor) -> Tensor:
        return self._keep(V, self.op.matmat(V))


def job_precision(requested: str, device: torch.device) -> tuple[str, str | None]:
    """(the precision the job's trace products really run at, a note or None)."""
    used = effective_precision(requested, device)
    if used == requested:
        return used, None
    return used, (f"{requested} has no effect on {torch.device(device).type} (no TF32 units): the products ran at "
                  "fp32 'highest'; the audit measured bf16, an upper bound of TF32's error")


def _ratio(err: float, stderr: float | None) -> float | None:
    """err / stderr; 0 where both are 0, None where the standard error is 0 or undefined."""
    if err == 0.0:
        return 0.0
    return err / stderr if stderr else None


def _dots(x: Tensor, y: Tensor) -> np.ndarray:
    """Row-wise inner products, accumulated in float64."""
    return (x * y).sum(dim=1, dtype=torch.float64).cpu().numpy()


def audit(rec: Recording, other: Callable[[str], Callable[[Tensor], Tensor]], *, requested: str, used: str,
          note: str | None, est, blocks: Mapping[str, slice], model_type: str) -> dict:
    """The ``precision_audit`` object of a measure JSON (module docstring): the recorded
    products of ``rec`` (made at ``used``) against ``other(precision)(U)``, the same
    vectors' products at the other precision; ``est`` the job's trace estimate
    (:class:`~villani.curvature.TraceEstimate` with ``blocks``' per-tensor samples)."""
    U, made = torch.stack(rec.inputs), torch.stack(rec.outputs)
    audited = "bf16" if used == "highest" else used
    again = other("bf16" if used == "highest" else "highest")(U)
    A, R = (again, made) if used == "highest" else (made, again)
    D = A - R
    rel = np.sqrt(_dots(D, D) / _dots(R, R))
    delta = np.abs(_dots(U, D))
    rel_quad = delta / np.abs(_dots(U, R))
    tr = float(est.mean)
    trace_err = float(delta.max())
    st = sample_stats(est.samples)
    groups = group_columns(list(est.block_names), model_type)
    per_tensor = np.stack([_dots(U[:, blocks[n]], D[:, blocks[n]]) for n in est.block_names], axis=1)
    group_ratios = []
    for cols in groups.values():
        err = float(np.abs(per_tensor[:, cols].sum(axis=1)).max())
        group_ratios.append(_ratio(err, sample_stats(est.block_samples[:, cols].sum(axis=1)).stderr))
    ratios = {"trace_L": _ratio(trace_err, st.stderr),
              "block_traces": None if None in group_ratios else max(group_ratios)}
    if est.frob_sq_samples is not None:  # a doubly stochastic trace estimates no ‖∇²L‖_F²
        frob_err = float(np.abs(_dots(A, A) - _dots(R, R)).max())
        ratios["frob_sq"] = _ratio(frob_err, sample_stats(est.frob_sq_samples).stderr)
    rel_stderr = st.stderr / abs(tr) if st.stderr is not None and tr else None
    return {
        "requested": requested, "used": used, "audited": audited, "device": rec.device.type, "note": note,
        "vectors": int(U.shape[0]), "products": int(U.shape[0]),
        "rel_product_max": float(rel.max()), "rel_product_median": float(np.median(rel)),
        "rel_quadratic_max": float(rel_quad.max()), "rel_quadratic_median": float(np.median(rel_quad)),
        "trace_rel_error": trace_err / abs(tr) if tr else None,
        "trace_rel_stderr": rel_stderr,
        "bound": None if rel_stderr is None else AUDIT_FRACTION * rel_stderr,
        "fraction": AUDIT_FRACTION,
        "error_over_stderr": ratios,
        "passed": all(r is not None and r <= AUDIT_FRACTION for r in ratios.values()),
        "fallback": None,
    }


class TracePrecision:
    """The operators of one job's trace products and their audit (module docstring).

    ``H`` is the job's ``highest`` ModelHessian (first-order quantities, Lanczos, SLQ);
    ``make_op(precision)`` builds another on the same model and batches. One gradient
    graph lives at a time: ``H``'s is released before another operator builds its own."""

    def __init__(self, requested: str, H, make_op: Callable[[str], object]):
        self.requested, self.H, self.make_op = requested, H, make_op
        self.used, self.note = job_precision(requested, H.device)
        self.ops = [H]
        self.op = H if self.used == "highest" else self._new(self.used)
        self.recording = Recording(self.op, AUDIT_PRODUCTS)
        self.fallback_products = 0

    def _new(self, precision: str):
        self.H.release()
        op = self.make_op(precision)
        self.ops.append(op)
        return op

    def trace_done(self) -> None:
        """Free the cheaper operator's graph once the Hutchinson products are made."""
        if self.op is not self.H:
            self.op.release()

    def _products_at(self, precision: str) -> Callable[[Tensor], Tensor]:
        op = self.H if precision == "highest" else self._new(precision)

        def apply(U: Tensor) -> Tensor:
            out = op.matmat(U)
            if op is not self.H:
                op.release()
            return out

        return apply

    def settle(self, est, run_trace: Callable[[object], object], *, blocks: Mapping[str, slice], model_type: str):
        """(the trace estimate to publish, the ``precision_audit`` object): the audit, and
        where it failed below ``highest`` the estimate recomputed there by ``run_trace(H)``."""
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero quadratic form: null
            record = audit(self.recording, self._products_at, requested=self.requested, used=self.used,
                           note=self.note, est=est, blocks=blocks, model_type=model_type)
        self.recording.inputs.clear()
        self.recording.outputs.clear()
        if needs_fallback(record):
            start, discarded = time.perf_counter(), int(est.num_matvecs)
            est = run_trace(self.H)
            self.fallback_products = discarded
            record["fallback"] = {"reason": f"the {self.used} products failed the audit; trace recomputed at highest",
                                  "products": int(est.num_matvecs), "discarded_products": discarded,
                                  "seconds": round(time.perf_counter() - start, 4)}
            record["used"] = "highest"
        return est, finite_or_none(record)

    def graph_builds(self) -> int:
        """Whole gradient graphs built by the job's operators (where the graph is kept)."""
        return sum(op.builds for op in self.ops) // len(self.H.batches)


def needs_fallback(record: Mapping) -> bool:
    """Whether the job must recompute its trace at ``highest``: its products ran cheaper and failed the audit."""
    return record["used"] != "highest" and not record["passed"]


def finite_or_none(record: dict) -> dict:
    """The record with non-finite numbers as null (a zero quadratic form, say)."""
    def fix(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return {k: fix(x) for k, x in v.items()} if isinstance(v, dict) else v
    return fix(record)
