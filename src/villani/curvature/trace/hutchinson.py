r"""Girard–Hutchinson trace estimation with Rademacher probes.

For probes :math:`v_1,\dots,v_M` with :math:`\mathbb{E}[vv^\top]=I`,

.. math::
    \widehat{\operatorname{tr}}A = \frac1M\sum_{m=1}^M v_m^\top A v_m,
    \qquad \mathbb{E}\,\widehat{\operatorname{tr}}A = \operatorname{tr}A .

**Why Rademacher.** For a symmetric :math:`A` and Rademacher :math:`v`,

.. math::
    \operatorname{Var}(v^\top A v) = 2\Big(\|A\|_F^2 - \sum_i A_{ii}^2\Big),

while Gaussian probes give :math:`2\|A\|_F^2`: Rademacher probes never do worse and
remove the diagonal's contribution entirely (a diagonal :math:`A` is estimated exactly).
The single-sample coefficient of variation is therefore
:math:`\sqrt{2(\|A\|_F^2-\sum_i A_{ii}^2)}/|\operatorname{tr}A|`, and that of the
M-probe mean is smaller by :math:`\sqrt M`.

**Free by-products of the same matvecs.**

- :math:`\mathbb{E}\|Av\|^2 = \operatorname{tr}(A\,\mathbb{E}[vv^\top]A) = \|A\|_F^2`:
  an unbiased Frobenius norm (``frob_sq``).
- For a block :math:`b` of coordinates,
  :math:`\mathbb{E}[v_b^\top (Av)_b] = \operatorname{tr} A_{bb}`: per-block traces
  (``block_means``); over a partition they sum to the sample itself.
- :math:`d^{(m)} = v_m \odot Av_m` has :math:`\mathbb{E} d^{(m)}_i = A_{ii}`; for
  independent probes :math:`\mathbb{E}[d^{(m)}_i d^{(l)}_i] = A_{ii}^2`, so
  :math:`\frac{\|\sum_m d^{(m)}\|^2 - \sum_m\|d^{(m)}\|^2}{M(M-1)}` is unbiased for
  :math:`\sum_i A_{ii}^2` (``diag_sq``). With ``frob_sq`` it gives the predicted
  variance above (``TraceEstimate.predicted_var``).

The confidence interval is t-based: :math:`\bar x \pm t_{0.975,M-1}\,s/\sqrt M`.

**Deflation** (``deflation=``, :mod:`.deflated_hutchinson`): with an orthonormal
:math:`Q` and :math:`P = I - QQ^\top`, the probes become :math:`Pv` and every sample is
:math:`\operatorname{tr}(Q^\top AQ) + (Pv)^\top A(Pv)`; the by-products stay unbiased
for :math:`A` itself (formulas there).

**A CI target** (``target=``, :mod:`.two_stage`): ``num_probes`` becomes the
maximum; a pilot of ``target.min_probes`` probes decides, by Stein's two-stage rule, how
many more to draw, and the CI is Stein's (it keeps its coverage; stopping at the first
narrow t-interval does not).

Example:
    >>> import torch
    >>> A = torch.diag(torch.arange(1.0, 101.0, dtype=torch.float64))
    >>> est = hutchinson(A, 8, seed=0)
    >>> round(est.mean, 6)   # diagonal A: every Rademacher sample is exact
    5050.0
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from ..operators.linear import apply_rows, as_operator, operator_device, operator_dtype
from ..operators.vectors import operator_vectors
from .deflated_hutchinson import Deflation
from .estimate import TraceEstimate, summarize_samples
from .two_stage import CITarget, two_stage_half_width, two_stage_size

__all__ = ["hutchinson", "normalize_blocks"]


def normalize_blocks(blocks, dim: int, device: torch.device) -> list[tuple[str, slice | Tensor]]:
    """Turn a block specification into ``[(name, index)]`` with slice or index-tensor indices.

    ``blocks`` is a mapping ``name -> index`` (or a sequence of ``(name, index)`` pairs)
    where an index is a ``slice``, a ``range`` with step 1, a ``(start, stop)`` pair, a
    boolean mask of length ``dim`` or an integer index tensor.
    """
    items = blocks.items() if isinstance(blocks, Mapping) else blocks
    out: list[tuple[str, slice | Tensor]] = []
    for name, index in items:
        if isinstance(index, range) and index.step == 1:
            index = slice(index.start, index.stop)
        elif isinstance(index, tuple) and len(index) == 2:
            index = slice(int(index[0]), int(index[1]))
        if isinstance(index, slice):
            start, stop, step = index.indices(dim)
            if step != 1 or start >= stop:
                raise ValueError(f"block {name!r}: empty or strided slice {index}")
            out.append((str(name), slice(start, stop)))
            continue
        index = torch.as_tensor(index)
        if index.dtype == torch.bool:
            if index.numel() != dim:
                raise ValueError(f"block {name!r}: mask of length {index.numel()} != dim {dim}")
            index = index.nonzero().flatten()
        if index.numel() == 0 or int(index.min()) < 0 or int(index.max()) >= dim:
            raise ValueError(f"block {name!r}: indices empty or outside [0, {dim})")
        out.append((str(name), index.to(device=device, dtype=torch.long)))
    return out


def hutchinson(op, num_probes: int, *, seed: int = 0, first_probe: int = 0, blocks=None, batch_size: int = 1,
               deflation: Deflation | None = None, target: CITarget | None = None, callback=None) -> TraceEstimate:
    r"""Estimate :math:`\operatorname{tr}A` from seeded Rademacher probes.

    Args:
        op: a linear operator (``dim`` + ``matvec``), a square tensor, or a
            ``(callable, dim)`` pair.
        num_probes: number of probes M (= matvecs); the maximum with ``target``.
        seed: probe seed; probe ``m`` depends only on ``(seed, dim, m)``.
        first_probe: use probes ``first_probe, first_probe + 1, …`` of the seed (e.g. 1
            when probe 0 started the Lanczos run that built ``deflation``).
        blocks: optional coordinate blocks (``name -> slice | (start, stop) | mask |
            indices``, e.g. ``ModelHessian.param_blocks()``) for per-block traces from
            the same probes; global coordinates also for an operator with sharded
            vectors (``op.vectors``, see :mod:`~villani.curvature.operators.vectors`).
        batch_size: probes per operator call (uses ``op.matmat`` when > 1).
        deflation: a :class:`~villani.curvature.Deflation` of ``op`` (its basis must not
            depend on these probes): estimate :math:`\operatorname{tr}(Q^\top AQ)`
            exactly and only the remainder by probes. A basis grown from one of these
            very probes (a Lanczos run from probe 0 of ``seed``, with ``first_probe=0``)
            is refused: that probe's remainder would be 0, a biased sample.
        target: a :class:`~villani.curvature.CITarget`: stop by Stein's two-stage rule.
        callback: optional ``callback(done, total, samples)`` after every operator call:
            probes done, the probes this call will draw (``num_probes`` until a
            ``target``'s pilot has fixed the count), and the samples so far (float64 array; their mean
            is the running estimate). For progress reports; it must not change anything.

    Returns:
        A :class:`TraceEstimate` with all samples, the CI, ``frob_sq``, ``diag_sq`` and,
        with ``blocks``, the per-block samples and means; deflated, also the remainder's
        ``remainder_frob_sq`` / ``remainder_diag_sq`` (its predicted variance).
    """
    op = as_operator(op)
    if num_probes < 1:
        raise ValueError(f"num_probes must be ≥ 1, got {num_probes}")
    dtype, device = operator_dtype(op), operator_device(op)
    if first_probe < 0:
        raise ValueError(f"first_probe must be ≥ 0, got {first_probe}")
    if deflation is not None and deflation.start_seed == int(seed) and first_probe == 0:
        raise ValueError(f"deflation: its Lanczos run started from probe 0 of seed {seed}; "
                         "use first_probe ≥ 1 or another seed, so the probes are independent of the basis")
    vectors = operator_vectors(op)  # coordinate sums below are per-process partial sums, totalled by vectors.sum
    stream = vectors.probes(seed, dtype=dtype, device=device)
    if first_probe:
        stream.next(first_probe)  # probes 0..first_probe−1 are drawn and not used
    named = normalize_blocks(blocks, op.dim, device) if blocks is not None else []
    named = [(name, vectors.local_index(idx)) for name, idx in named]
    sums = _ProbeSums(vectors, dtype, device, named, deflation)
    exact = deflation.trace if deflation is not None else 0.0

    def report(planned: int) -> None:
        if callback is not None:
            x = exact + sums.samples()
            callback(x.size, planned, x)

    pilot = num_probes if target is None else min(target.min_probes, num_probes)
    for G in stream.chunks(pilot, batch_size):
        sums.add(G, op)
        report(num_probes)
    total = pilot if target is None else two_stage_size(exact + sums.samples(), target, num_probes)
    for G in stream.chunks(total - pilot, batch_size):
        sums.add(G, op)
        report(total)

    x = exact + sums.samples()
    mean, std, stderr, ci = summarize_samples(x)
    half_target = None
    if target is not None:
        half_target = target.half_width(mean)
        if x.size >= 2:
            half = two_stage_half_width(x, pilot)
            ci = (mean - half, mean + half)
    return TraceEstimate(
        mean=mean, std=std, stderr=stderr, ci95=ci, samples=x, num_matvecs=int(x.size),
        method="hutchinson" if deflation is None else "deflated hutchinson",
        max_probes=int(num_probes), target_half_width=half_target, **sums.by_products(),
    )


class _ProbeSums:
    r"""Running sums over the probes of one call: per-probe samples and ‖A y‖², block
    samples, and the diagonal cross-products of :math:`y \odot Ay` (and, deflated, of
    :math:`v \odot PAPv` with :math:`y = Pv`). Coordinate sums are this process's partial
    sums, totalled over the processes by ``vectors.sum`` (sharded vectors)."""

    def __init__(self, vectors, dtype, device, named, deflation: Deflation | None):
        self.vectors, self.named, self.deflation = vectors, named, deflation
        self.rows: list[Tensor] = []  # per probe: yᵀAy
        self.sq: list[Tensor] = []  # ‖Ay‖²
        self.blocks: list[Tensor] = []
        self.diag_sum = torch.zeros(vectors.local_dim, dtype=dtype, device=device)
        self.diag_sq_total = 0.0
        if deflation is not None:
            self.rem_sq: list[Tensor] = []  # ‖PAy‖²
            self.rem_diag_sum = torch.zeros(vectors.local_dim, dtype=dtype, device=device)
            self.rem_diag_sq_total = 0.0

    def add(self, G: Tensor, op) -> None:
        total = self.vectors.sum
        Y = G if self.deflation is None else self.deflation.project(G)
        Z = apply_rows(op, Y)
        D = Y * Z  # row m: y_m ⊙ A y_m
        self.rows.append(total(D.sum(dim=1, dtype=torch.float64)).cpu())
        sq = total((Z * Z).sum(dim=1, dtype=torch.float64))
        self.sq.append(sq.cpu())
        self.diag_sum += D.sum(dim=0)
        self.diag_sq_total += float(total((D * D).sum(dtype=torch.float64)))
        if self.named:
            rows = torch.stack([D[:, idx].sum(dim=1, dtype=torch.float64) for _, idx in self.named], dim=1)
            self.blocks.append(total(rows).cpu())
        if self.deflation is not None:
            C, PZ = self.deflation.split(Z)  # Z = CQᵀ + PZ, C all-reduced
            self.rem_sq.append((sq - C.double().square().sum(dim=1).to(sq.device)).cpu())
            R = G * PZ  # v ⊙ PAPv
            self.rem_diag_sum += R.sum(dim=0)
            self.rem_diag_sq_total += float(total((R * R).sum(dtype=torch.float64)))
        del Z, D

    def samples(self) -> np.ndarray:
        return torch.cat(self.rows).numpy()

    def _cross(self, diag_sum: Tensor, sq_total: float, m: int) -> float | None:
        """(‖Σ_m d⁽ᵐ⁾‖² − Σ_m ‖d⁽ᵐ⁾‖²) / (M(M−1)): unbiased Σ_i (E d_i)²."""
        if m < 2:
            return None
        return (float(self.vectors.sum(diag_sum.double().square().sum())) - sq_total) / (m * (m - 1))

    def by_products(self) -> dict:
        m = sum(r.numel() for r in self.rows)
        sq = torch.cat(self.sq).numpy()
        out: dict = {}
        defl = self.deflation
        if defl is None:
            out["frob_sq"] = float(np.mean(sq))
            out["frob_sq_samples"] = sq
            out["diag_sq"] = self._cross(self.diag_sum, self.diag_sq_total, m)
            exact_blocks = None
        else:
            # ‖A‖_F² = ‖AQ‖_F² + ‖AP‖_F², E‖APv‖² = ‖AP‖_F²;
            # diag A = e + diag(AP) with e = diag(AQQᵀ) exact and E[y ⊙ Ay] = diag(AP).
            total = self.vectors.sum
            e = defl.diagonal
            hbar = (self.diag_sum / m).to(device=e.device, dtype=torch.float64)
            cross = self._cross(self.diag_sum, self.diag_sq_total, m)
            out["frob_sq"] = defl.frob_sq + float(np.mean(sq))
            out["frob_sq_samples"] = defl.frob_sq + sq
            out["diag_sq"] = None if cross is None else float(total(e.square().sum() + 2.0 * (e @ hbar))) + cross
            out["deflation_rank"] = defl.rank
            out["exact_part"] = defl.trace
            out["remainder_frob_sq"] = float(np.mean(torch.cat(self.rem_sq).numpy()))
            out["remainder_diag_sq"] = self._cross(self.rem_diag_sum, self.rem_diag_sq_total, m)
            exact_blocks = total(torch.stack([e[idx.to(e.device) if isinstance(idx, Tensor) else idx].sum()
                                              for _, idx in self.named])).cpu().numpy() if self.named else None
        if self.named:
            names = tuple(name for name, _ in self.named)
            bs = torch.cat(self.blocks).numpy()
            if exact_blocks is not None:
                bs = bs + exact_blocks
            out["block_names"] = names
            out["block_samples"] = bs
            out["block_means"] = {n: float(bs[:, j].mean()) for j, n in enumerate(names)}
            out["block_stderr"] = {n: summarize_samples(bs[:, j])[2] for j, n in enumerate(names)}
        return out
