r"""Hutch++ trace estimation (Meyer, Musco, Musco & Woodruff, SOSA 2021).

Split the budget of ``m`` matvecs in three. With a Rademacher sketch
:math:`S\in\mathbb{R}^{n\times k}`, let :math:`Q` be an orthonormal basis of
:math:`AS` and :math:`P = I - QQ^\top`. Then, exactly,

.. math::
    \operatorname{tr}A = \operatorname{tr}(Q^\top A Q) + \operatorname{tr}(PAP),

and the second term is estimated by Hutchinson with fresh Rademacher probes
:math:`g_1..g_{m-2k}` (independent of :math:`Q`, hence unbiased):

.. math::
    \widehat{\operatorname{tr}}A = \operatorname{tr}(Q^\top A Q)
    + \frac{1}{m-2k}\sum_i (Pg_i)^\top A (Pg_i).

The first term removes the top of the spectrum exactly, so when the eigenvalues decay
(low rank plus small noise, as Hessians of trained networks often are) the variance is
that of the deflated remainder, :math:`2\|PAP\|_F^2` at most instead of
:math:`2\|A\|_F^2`. On a flat spectrum Hutch++ is no better than Hutchinson.
"""

from __future__ import annotations

import numpy as np
import torch

from ..operators.linear import apply_rows, as_operator, operator_device, operator_dtype
from ..operators.vectors import LocalVectors, operator_vectors
from ..probes import ProbeStream
from .estimate import TraceEstimate, summarize_samples

__all__ = ["hutchpp"]


def hutchpp(op, num_matvecs: int, *, seed: int = 0, batch_size: int = 1) -> TraceEstimate:
    r"""Estimate :math:`\operatorname{tr}A` with Hutch++ using ``num_matvecs`` matvecs.

    ``k = num_matvecs // 3`` sketch vectors, ``k`` matvecs for :math:`AQ`, and the
    remaining ``num_matvecs - 2k`` Hutchinson probes on the deflated operator.

    Returns:
        A :class:`TraceEstimate` whose ``samples`` are
        :math:`\operatorname{tr}(Q^\top AQ) + (Pg_i)^\top A(Pg_i)`; their mean is the
        Hutch++ estimate and ``stderr``/``ci95`` are conditional on the sketch.
    """
    op = as_operator(op)
    if num_matvecs < 3:
        raise ValueError(f"Hutch++ needs at least 3 matvecs, got {num_matvecs}")
    if not isinstance(operator_vectors(op), LocalVectors):
        raise ValueError("hutchpp: operators with sharded vectors are not supported (the sketch's QR is not "
                         "distributed); use hutchinson")
    k = num_matvecs // 3
    n_hutch = num_matvecs - 2 * k
    dtype, device = operator_dtype(op), operator_device(op)
    stream = ProbeStream(op.dim, seed, dtype=dtype, device=device)

    sketch = torch.cat([apply_rows(op, S) for S in stream.chunks(k, batch_size)])  # rows A s_j
    Q, _ = torch.linalg.qr(sketch.T, mode="reduced")  # (n, k), orthonormal columns
    Qt = Q.T.contiguous()
    del sketch, Q
    AQ = torch.cat([apply_rows(op, Qt[i : i + batch_size]) for i in range(0, k, batch_size)])
    t_top = float((Qt * AQ).sum(dtype=torch.float64))
    del AQ

    rest = []
    for G in stream.chunks(n_hutch, batch_size):
        PG = G - (G @ Qt.T) @ Qt
        rest.append((PG * apply_rows(op, PG)).sum(dim=1, dtype=torch.float64).cpu())
    x = t_top + torch.cat(rest).numpy()
    mean, std, stderr, ci = summarize_samples(np.asarray(x))
    return TraceEstimate(
        mean=mean, std=std, stderr=stderr, ci95=ci, samples=x, num_matvecs=num_matvecs, method="hutch++"
    )
