r"""``villani diagnose``: Ψ_s as a function of λ for any causal LM, from one measurement.

At a fixed θ only the data term is measured; the regulariser
:math:`\frac\lambda2\|\theta\|^2` enters in closed form (:mod:`villani.diagnostics.psi`):

.. math::
    \Psi_s(\lambda) = a\lambda^2 + b\lambda + c,\qquad
    a = \frac{\|\theta\|^2}{s},\quad
    b = \frac{2\,\theta\cdot\nabla L}{s} - d,\quad
    c = \frac{\|\nabla L\|^2}{s} - \operatorname{tr}\nabla^2L .

So one measurement of :math:`t = \operatorname{tr}\nabla^2L` (Hutchinson, with its 95%
interval :math:`[t_{lo}, t_{hi}]`), :math:`\|\nabla L\|^2`, :math:`\theta\cdot\nabla L`,
:math:`\|\theta\|^2` and d gives Ψ_s(λ) for every λ (:func:`psi_of_lambda`): the Ψ_s of
:math:`F_\lambda = L + \frac\lambda2\|\theta\|^2` *at this θ* — what the diagnostic would
read if this model's weights were the current iterate of a run with weight decay λ — not at
the minimiser of :math:`F_\lambda`. Only :math:`t` is random and Ψ_s decreases in it, so
the 95% band is :math:`[\Psi_s(\lambda; t_{hi}), \Psi_s(\lambda; t_{lo})]`, of constant
width :math:`t_{hi} - t_{lo}` at every λ.

**Sign changes** (:func:`sign_changes`). With :math:`a > 0` the parabola is negative
between its real roots :math:`r_- \le r_+` and positive outside them; on λ ≥ 0 Ψ_s
changes sign from + to − at :math:`r_-` and from − to + at :math:`r_+` where those are
≥ 0. Typically :math:`c < 0` (a positive trace larger than ‖∇L‖²/s): then
:math:`r_- < 0 < r_+`, one sign change, Ψ_s > 0 exactly for λ > r₊ (about :math:`sd/\|\theta\|^2`
when d dominates b). With :math:`c > 0` (a large gradient, or a negative trace at a
saddle) and :math:`b < 0` there are two: + → − at :math:`r_-` near 0, − → + at :math:`r_+`. With the discriminant :math:`D(t) = b^2 - 4a(\|\nabla L\|^2/s - t)`
increasing in t, :math:`r_+(t)` increases and :math:`r_-(t)` decreases in t, so the
roots' 95% intervals are :math:`[r_+(t_{lo}), r_+(t_{hi})]` and
:math:`[r_-(t_{hi}), r_-(t_{lo})]` — the roots of the band's edges. An end is ``None``
when at that trace the root is not real or falls below 0: the data are then consistent
with no such sign change on λ ≥ 0.

**Measurement** (:func:`measure_parts`), on the Hessian of L (the operator at λ = 0: λ
enters in closed form): L, ∇L and θ from the operator's first-order pass
(:meth:`~villani.curvature.HessianOperator.objective`, its L-quantities); tr ∇²L by Hutchinson (``probes`` Rademacher probes of ``probe_seed``); the top-k
eigenvalues of ∇²L with Ritz residuals (Lanczos from probe 0; those of ∇²F(λ) are the
same plus λ). The operator is :class:`~villani.curvature.ModelHessian` on one process, or
with ``torchrun`` (``--sharded``) :class:`~villani.curvature.DataParallelHessian` (exact,
model replicated) or :class:`~villani.curvature.FiniteDifferenceHessian` on an FSDP2 model
(the model sharded; products good to a few 1e-4 in fp32, ``docs/curvature.md``); every
sum runs through the operator's vectors, so the numbers are the same on every process.

**Data** (:func:`~villani.measure.diagnose_data.measurement_blocks_for`): the documents of ``split`` of a ``data.source``
(:func:`villani.data.sources.read_splits`, the same code as the ``tokenize`` stage; a
split the source lacks is carved from train's end), encoded with the *model's* tokenizer
(documents joined by its EOS), cut into blocks of ``seq_len`` tokens, and ``blocks`` of
them drawn by :func:`~villani.measure.measurement_set.sample_block_ids` with ``set_seed``. A
tokenizer whose vocabulary does not fit the model's embedding, or that maps the text to
fewer than ``min_distinct_tokens`` distinct tokens, is refused (:mod:`villani.measure.diagnose_data`).
``probes`` is bounded as ``measure.num_probes`` (≤ 100,000); progress lines as ``measure``'s.

Files (:func:`write_diagnosis`): ``diagnosis.json`` (inputs, the measured quantities, per
s the coefficients, Ψ_s(0), the sign changes with their intervals), ``psi_of_lambda.csv``
(the curve with its band); the figure is drawn by :mod:`villani.figures.diagnosis`. Keys:
``docs/measurements.md`` ("villani diagnose").
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from villani.diagnostics.psi import grad_F_sq, laplacian_F, psi_coefficients, psi_key, psi_s

__all__ = ["PsiParts", "SignChange", "psi_of_lambda", "sign_changes", "describe_sign_change", "default_lam_grid",
           "parse_lam_grid",
           "measure_parts", "diagnose", "write_diagnosis", "SCHEMA_VERSION",
           "CURVE_FILE", "JSON_FILE"]

log = logging.getLogger(__name__)
SCHEMA_VERSION = "villani.diagnose/1"
NOTE = ("Ψ_s(λ) = −(tr∇²L + λd) + ‖∇L + λθ‖²/s at this θ for every λ (F_λ = L + λ/2‖θ‖², all parameters "
        "regularised); only tr∇²L is estimated, so the band is the trace's 95% interval at every λ; "
        "top_eigenvalues are of ∇²L (those of ∇²F_λ are λ larger)")
JSON_FILE = "diagnosis.json"
CURVE_FILE = "psi_of_lambda.csv"


@dataclass(frozen=True)
class PsiParts:
    """The λ-free quantities at θ that fix Ψ_s(λ) for every λ and s.

    ``trace_L``: the estimate of tr ∇²L, ``trace_L_ci95``: its 95% interval (None with one
    probe); ``grad_L_sq`` = ‖∇L‖², ``theta_dot_grad_L`` = θ·∇L, ``theta_sq`` = ‖θ‖², ``d``.
    """

    trace_L: float
    trace_L_ci95: tuple[float, float] | None
    grad_L_sq: float
    theta_dot_grad_L: float
    theta_sq: float
    d: int

    def coefficients(self, s: float, trace_L: float | None = None) -> tuple[float, float, float]:
        """(a, b, c) of Ψ_s(λ) = aλ² + bλ + c at the trace ``trace_L`` (default: the estimate)."""
        t = self.trace_L if trace_L is None else trace_L
        return psi_coefficients(t, self.grad_L_sq, self.theta_dot_grad_L, self.theta_sq, self.d, s)


@dataclass(frozen=True)
class SignChange:
    """A λ ≥ 0 where Ψ_s changes sign: ``direction`` ``"-+"`` (negative below, positive
    above) or ``"+-"``; ``ci95`` the roots of the band's edges, an end ``None`` where the
    data are consistent with no such sign change (see the module doc)."""

    lam: float
    direction: str
    ci95: tuple[float | None, float | None] | None

    def to_dict(self) -> dict:
        return {"lam": self.lam, "direction": self.direction,
                "ci95": None if self.ci95 is None else list(self.ci95)}


def psi_of_lambda(parts: PsiParts, lam_grid: Sequence[float], s: float) -> pd.DataFrame:
    """Ψ_s at every λ of ``lam_grid``: columns ``lam``, ``laplacian_F`` (tr ∇²L + λd),
    ``grad_F_sq`` (‖∇L + λθ‖²), ``psi_s``, and the 95% band ``psi_s_lo``, ``psi_s_hi``
    (NaN without a trace interval) — each entry :func:`villani.diagnostics.psi.psi_s` of the parts."""
    lo_t, hi_t = parts.trace_L_ci95 if parts.trace_L_ci95 is not None else (math.nan, math.nan)
    rows = []
    for lam in lam_grid:
        lam = float(lam)
        if not math.isfinite(lam) or lam < 0:
            raise ValueError(f"--lam-grid: λ must be finite and ≥ 0, got {lam!r}")
        g = grad_F_sq(parts.grad_L_sq, parts.theta_dot_grad_L, parts.theta_sq, lam)
        rows.append({"lam": lam, "laplacian_F": laplacian_F(parts.trace_L, lam, parts.d), "grad_F_sq": g,
                     "psi_s": psi_s(parts.trace_L, g, lam, parts.d, s),
                     "psi_s_lo": psi_s(hi_t, g, lam, parts.d, s), "psi_s_hi": psi_s(lo_t, g, lam, parts.d, s)})
    return pd.DataFrame(rows, columns=["lam", "laplacian_F", "grad_F_sq", "psi_s", "psi_s_lo", "psi_s_hi"])


def _roots(a: float, b: float, c: float) -> tuple[float | None, float | None]:
    """(r₋, r₊) of aλ² + bλ + c (a ≥ 0), None where not real; for a = 0 the one root of
    the line is r₊ if the line rises, r₋ if it falls. Cancellation-free (Vieta)."""
    if a == 0.0:
        if b == 0.0:
            return None, None
        return (None, -c / b) if b > 0 else (-c / b, None)
    disc = b * b - 4.0 * a * c
    if disc < 0:
        return None, None
    q = -0.5 * (b + math.copysign(math.sqrt(disc), b))
    r1 = q / a
    r2 = c / q if q != 0.0 else r1
    return min(r1, r2), max(r1, r2)


def sign_changes(parts: PsiParts, s: float) -> list[SignChange]:
    """The λ ≥ 0 where Ψ_s changes sign, in increasing order, with 95% intervals from the
    trace interval (module doc). A root exactly at a double root (tangency) is no sign change."""
    a, b, c = parts.coefficients(s)
    if a < 0:
        raise ValueError(f"‖θ‖² must be ≥ 0, got {parts.theta_sq!r}")
    r_minus, r_plus = _roots(a, b, c)
    if r_minus is not None and r_minus == r_plus:
        return []
    ends: dict[str, tuple] = {}
    if parts.trace_L_ci95 is not None:
        lo, hi = (_roots(*parts.coefficients(s, t)) for t in parts.trace_L_ci95)
        ends = {"+-": (hi[0], lo[0]), "-+": (lo[1], hi[1])}  # r₋ falls, r₊ rises with the trace
    out = []
    for root, direction in ((r_minus, "+-"), (r_plus, "-+")):
        if root is None or root < 0:
            continue
        ci = ends.get(direction)
        if ci is not None:
            ci = tuple(None if e is None or e < 0 else float(e) for e in ci)
        out.append(SignChange(float(root), direction, ci))
    return out


def describe_sign_change(change: Mapping) -> str:
    """``− → + at λ = 147.6 (95% CI 147.5–147.8)`` for a :meth:`SignChange.to_dict`, with
    enough digits to tell the interval's ends from λ; an open end reads ``none``."""
    lam, ci = float(change["lam"]), change["ci95"]
    ends = [e for e in (ci or ()) if e is not None]
    spread = min([abs(e - lam) for e in ends if e != lam] or [abs(lam)]) / abs(lam) if lam else 1.0
    digits = int(min(8, max(3, 2 - math.floor(math.log10(spread)) if spread > 0 else 8)))

    def num(x):
        return "none" if x is None else f"{float(x):.{digits}g}"

    turn = "− → +" if change["direction"] == "-+" else "+ → −"
    interval = "" if ci is None else f" (95% CI {num(ci[0])}–{num(ci[1])})"
    return f"{turn} at λ = {num(lam)}{interval}"


def default_lam_grid(parts: PsiParts, s_values: Sequence[float], per_decade: int = 20) -> np.ndarray:
    """A log grid from 1e-6 (or three decades below the smallest sign change) to 10 (or
    one decade above the largest), ``per_decade`` points per decade, plus λ = 0."""
    roots = [sc.lam for s in s_values for sc in sign_changes(parts, s) if sc.lam > 0]
    lo = math.floor(math.log10(min([1e-6] + [r / 1e3 for r in roots])))
    hi = math.ceil(math.log10(max([10.0] + [r * 10 for r in roots])))
    return np.concatenate([[0.0], np.logspace(lo, hi, (hi - lo) * per_decade + 1)])


def parse_lam_grid(text: Sequence[str] | None) -> np.ndarray | None:
    """``--lam-grid`` values: numbers, or ``lo:hi:n`` for n log-spaced values from lo to hi
    (> 0), sorted, at least one > 0; None for none given. Bad text is a one-line ValueError."""
    if not text:
        return None
    out: list[float] = []
    for item in text:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                if ":" in part:
                    lo, hi, n = part.split(":")
                    lo, hi, n = float(lo), float(hi), int(n)
                    if not (0 < lo < hi) or n < 2:
                        raise ValueError
                    out.extend(np.logspace(math.log10(lo), math.log10(hi), n))
                else:
                    out.append(float(part))
            except ValueError:
                raise ValueError(f"--lam-grid: {part!r} is not a number or lo:hi:n with 0 < lo < hi, n ≥ 2") from None
    grid = np.array(sorted(set(out)), dtype=float)
    if not np.all(np.isfinite(grid)) or np.any(grid < 0) or not np.any(grid > 0):
        raise ValueError(f"--lam-grid: {' '.join(map(str, text))!r}: λ values must be finite and ≥ 0, "
                         "at least one > 0 (the figure's λ axis is logarithmic)")
    return grid


# --------------------------------------------------------------------------- measurement
def measure_parts(op, *, probes: int, probe_seed: int, top_k: int, lanczos_steps: int,
                  basis_device: str | None = None, progress=None) -> dict[str, Any]:
    """The quantities of :class:`PsiParts` and the spectrum of ∇²L at the operator's θ.

    ``op``: a Hessian of L (λ = 0), a :class:`~villani.curvature.HessianOperator` —
    ``ModelHessian``, ``DataParallelHessian`` or ``FiniteDifferenceHessian``; its
    :meth:`~villani.curvature.HessianOperator.objective` sums sharded vectors through
    ``op.vectors``. Returns ``parts``, ``loss``, the ``trace`` estimate, ``top``
    (eigenvalues of ∇²L with residuals) and ``hvp_count``. ``basis_device``: where the
    Lanczos basis (``lanczos_steps`` × d/R numbers) is kept (default: the operator's device;
    ``"cpu"`` moves it to host memory). ``progress``: a :class:`villani.runtime.progress.Progress`
    counting HVPs (phases ``hutchinson``, ``lanczos``), or None.
    """
    from villani.runtime.progress import running_top_eigenvalue, running_trace

    from villani.curvature import hutchinson, top_eigenvalues

    if getattr(op, "lam", 0.0):
        raise ValueError("measure_parts needs the Hessian of L (lam = 0); λ enters in closed form")
    first = op.objective()  # at λ = 0: L, ∇L and θ
    count = (lambda offset, show: progress.counter(offset, show)) if progress is not None else (lambda *_: None)
    if progress is not None:
        progress.phase("hutchinson", total=int(probes) + int(lanczos_steps))
    est = hutchinson(op, int(probes), seed=int(probe_seed), callback=count(0, running_trace))
    if progress is not None:
        progress.phase("lanczos", total=est.num_matvecs + int(lanczos_steps))
    top = top_eigenvalues(op, int(top_k), num_steps=int(lanczos_steps), seed=int(probe_seed),
                          basis_device=basis_device, callback=count(est.num_matvecs, running_top_eigenvalue))
    parts = PsiParts(trace_L=float(est.mean), trace_L_ci95=None if est.ci95 is None else tuple(map(float, est.ci95)),
                     grad_L_sq=first.grad_L_sq, theta_dot_grad_L=first.theta_dot_grad_L, theta_sq=first.theta_sq,
                     d=int(op.dim))
    return {"parts": parts, "loss": first.loss_L, "trace": est, "top": top,
            "hvp_count": int(est.num_matvecs + top.num_matvecs)}


# --------------------------------------------------------------------------- the command
def _sharded_operator(model, batches, kind: str, device: torch.device):
    """``DataParallelHessian`` (``exact``) or ``FiniteDifferenceHessian`` of an FSDP2 model
    (``fsdp``: ``fully_shard`` on every module class of ``model._no_split_modules`` — its
    transformer blocks — then the root)."""
    from villani.curvature import DataParallelHessian, FiniteDifferenceHessian

    if kind == "exact":
        return DataParallelHessian(model, batches)
    from torch.distributed.fsdp import fully_shard

    block_classes = set(getattr(model, "_no_split_modules", None) or ())
    blocks = [m for m in model.modules() if type(m).__name__ in block_classes]
    if not blocks:
        raise ValueError(f"--sharded fsdp: {type(model).__name__} names no transformer block class "
                         "(_no_split_modules) to shard; use --sharded exact")
    for m in blocks:
        fully_shard(m)
    fully_shard(model)
    return FiniteDifferenceHessian(model, batches)


def diagnose(model_ref: str, data_cfg: Mapping, *, tokenizer: str | None = None, split: str = "train",
             seq_len: int | None = None, blocks: int = 16, batch_size: int = 4, set_seed: int = 0,
             probes: int = 32, probe_seed: int = 0, top_k: int = 5, lanczos_steps: int | None = None,
             s_values: Sequence[float] = (1.0,), lam_grid: Sequence[float] | None = None,
             device: str | None = None, sharded: str | None = None,
             basis_device: str | None = None, min_distinct_tokens: int = 16) -> tuple[dict, pd.DataFrame]:
    """Measure a pretrained causal LM once and assemble Ψ_s(λ): return (record, curve).

    ``model_ref``: hub name or ``save_pretrained`` directory; ``tokenizer``: default the
    model's. ``sharded``: ``None`` (one process), ``"exact"`` or ``"fsdp"`` (under an
    initialised ``torch.distributed`` process group: every process calls this with the same
    arguments and gets the same numbers). ``basis_device``: see :func:`measure_parts`.
    ``min_distinct_tokens``: refuse a tokenizer that maps the text to fewer distinct tokens
    (:mod:`villani.measure.diagnose_data`).
    """
    from villani.io.finite import check_finite
    from villani.measure.diagnose_data import checked_counts, checked_model, measurement_blocks_for
    from villani.model.causal_lm import describe_model, pick_device
    from villani.runtime.progress import Progress

    t0 = time.perf_counter()
    s_values, lanczos_steps = checked_counts(blocks, batch_size, probes, top_k, s_values, lanczos_steps)
    dev = pick_device(device)
    model, checkpoint, seq_len = checked_model(str(model_ref), tokenizer, seq_len)
    data = measurement_blocks_for(data_cfg, tokenizer or model_ref, split=split, seq_len=seq_len, blocks=blocks,
                                  set_seed=set_seed, vocab_size=int(model.get_input_embeddings().num_embeddings),
                                  min_distinct=min_distinct_tokens,
                                  model_ref=str(model_ref), key="--tokenizer" if tokenizer else "--model (its tokenizer)")
    batches = [b.to(dev) for b in data["blocks"].split(int(batch_size))]
    arch = describe_model(model)
    if sharded != "fsdp":  # fully_shard moves each unit's shards to the device itself
        model = model.to(dev)
    t1 = time.perf_counter()
    op, world = _hessian_of_L(model, batches, sharded, dev)
    with Progress(f"diagnose {Path(str(model_ref).rstrip('/')).name}", int(probes) + lanczos_steps, unit="HVP",
                  logger=log) as bar:
        m = measure_parts(op, probes=probes, probe_seed=probe_seed, top_k=top_k, lanczos_steps=lanczos_steps,
                          basis_device=basis_device, progress=bar)
    t2 = time.perf_counter()
    parts, est, top = m["parts"], m["trace"], m["top"]
    where = f"diagnose {model_ref}"
    check_finite({"loss": m["loss"], "grad_L_sq_norm": parts.grad_L_sq, "theta_dot_grad_L": parts.theta_dot_grad_L,
                  "theta_sq_norm": parts.theta_sq}, where)
    check_finite(est.samples, where, "trace_L samples")
    grid = np.asarray(lam_grid, dtype=float) if lam_grid is not None else default_lam_grid(parts, s_values)
    curve, per_s = _psi_curves(parts, s_values, grid)
    record = {
        "schema": SCHEMA_VERSION,
        "model": {"source": str(model_ref), **arch,
                  "weights_sha256": None if checkpoint is None else checkpoint["weights_sha256"]},
        "tokenizer": str(tokenizer or model_ref),
        "data": {"source": data["source"], "revision": data_cfg.get("revision"), "source_commit": data["source_commit"],
                 "text_column": data_cfg.get("text_column"), "split": split, "split_origin": data["origin"],
                 **{k: data[k] for k in ("text_sha256", "split_blocks", "distinct_tokens")},
                 "split_tokens": data["tokens"], "seq_len": seq_len, "blocks": int(blocks), "set_seed": int(set_seed),
                 "batch_size": int(batch_size), "ids": data["ids"].tolist(),
                 "num_tokens": int(sum(b.shape[0] * (b.shape[1] - 1) for b in batches))},
        "measurement": {"operator": type(op).__name__, "sharded": sharded, "world_size": world, "device": dev.type,
                        "dtype": str(next(iter(model.parameters())).dtype).replace("torch.", ""),
                        "probes": int(probes), "probe_seed": int(probe_seed), "top_k": int(top_k),
                        "lanczos_steps": lanczos_steps, "basis_device": basis_device},
        "d": parts.d, "loss": m["loss"], "theta_sq_norm": parts.theta_sq, "grad_L_sq_norm": parts.grad_L_sq,
        "theta_dot_grad_L": parts.theta_dot_grad_L, "trace_L": _trace_record(est, parts),
        "spectrum_of": "hessian_L",
        "top_eigenvalues": [float(x) for x in top.values],
        "top_residuals": [float(x) for x in top.residuals],
        "s_values": s_values,
        "lam_grid": [float(x) for x in grid],
        "psi_s": per_s,
        "hvp_count": m["hvp_count"],
        "seconds": {"load": round(t1 - t0, 3), "measure": round(t2 - t1, 3),
                    "total": round(time.perf_counter() - t0, 3)},
        "versions": _versions(),
        "note": NOTE,
    }
    check_finite(record, where)
    return record, curve


def _trace_record(est, parts: PsiParts) -> dict:
    """The ``trace_L`` entry of diagnosis.json: the Hutchinson estimate, its samples and statistics."""
    from villani.statistics.samples import sample_stats

    st = sample_stats(est.samples)
    return {"mean": st.mean, "std": st.std, "stderr": st.stderr,
            "ci95": list(parts.trace_L_ci95) if parts.trace_L_ci95 else None, "rel_stderr": st.rel_stderr,
            "shapiro_p": st.shapiro_p, "frob_sq": None if est.frob_sq is None else float(est.frob_sq),
            "num_probes": est.num_probes, "samples": [float(x) for x in est.samples],
            "estimator": "hutchinson (Rademacher)"}


def _hessian_of_L(model, batches, sharded: str | None, dev: torch.device):
    """(the Hessian operator of L — λ = 0, every λ in closed form —, number of processes):
    ``ModelHessian`` on one process, else :func:`_sharded_operator` under the initialised
    process group."""
    from villani.curvature import ModelHessian

    if sharded is None:
        return ModelHessian(model, batches, lam=0.0), 1
    import torch.distributed as dist

    world = dist.get_world_size()
    if len(batches) < world:
        raise ValueError(f"--blocks/--batch-size: {len(batches)} micro-batches for {world} processes; "
                         "every process needs at least one")
    return _sharded_operator(model, batches, sharded, dev), world


def _psi_curves(parts: PsiParts, s_values: Sequence[float], grid) -> tuple[pd.DataFrame, dict]:
    """(the curve of every s on ``grid``, per s: coefficients, Ψ_s(0) with its CI, sign changes)."""
    curves, per_s = [], {}
    for s in s_values:
        curves.append(psi_of_lambda(parts, grid, s).assign(s=s))
        a, b, c = parts.coefficients(s)
        at_zero = psi_of_lambda(parts, [0.0], s).iloc[0]
        per_s[psi_key(s)] = {
            "coefficients": {"lam_sq": a, "lam": b, "const": c},
            "psi_at_zero": float(at_zero["psi_s"]),
            "psi_at_zero_ci95": None if parts.trace_L_ci95 is None else [float(at_zero["psi_s_lo"]),
                                                                        float(at_zero["psi_s_hi"])],
            "sign_changes": [sc.to_dict() for sc in sign_changes(parts, s)],
            "positive_for_large_lam": a > 0,
        }
    curve = pd.concat(curves, ignore_index=True)
    return curve[["s", "lam", "laplacian_F", "grad_F_sq", "psi_s", "psi_s_lo", "psi_s_hi"]], per_s


def _versions() -> dict[str, str]:
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def write_diagnosis(record: Mapping, curve: pd.DataFrame, out_dir: str | Path) -> dict[str, str]:
    """Write ``psi_of_lambda.csv`` then ``diagnosis.json`` (atomically) into ``out_dir``;
    return their paths."""
    from villani.io import atomic

    out = Path(out_dir)
    paths = {"curve": str(out / CURVE_FILE), "json": str(out / JSON_FILE)}
    atomic.write_text(paths["curve"], curve.to_csv(index=False))
    atomic.write_json(paths["json"], dict(record, files={"curve": CURVE_FILE}))
    return paths
