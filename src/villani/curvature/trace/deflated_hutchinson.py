r"""Deflated Hutchinson: the top of the spectrum exactly, only the rest by probes.

For any :math:`Q\in\mathbb R^{n\times k}` with orthonormal columns and
:math:`P = I - QQ^\top`,

.. math::
    \operatorname{tr}A = \operatorname{tr}(Q^\top AQ) + \operatorname{tr}(PAP),

exactly. The first term costs the k products :math:`AQ`; Hutchinson with Rademacher
:math:`v` on the second, :math:`\mathbb E[(Pv)^\top A(Pv)] = \operatorname{tr}(PAP)`, is
unbiased for *any* :math:`Q` chosen independently of the probes (Gambhir, Stathopoulos &
Orginos 2017; Hutch++ is the case of a random sketch, :mod:`.hutchpp`). Its
sample variance is that of the remainder,

.. math::
    \operatorname{Var}\big(v^\top PAPv\big) = 2\Big(\|PAP\|_F^2 - \sum_i (PAP)_{ii}^2\Big),

so when a few eigen-directions carry most of :math:`\|A\|_F^2` — Hessians of trained
networks — and :math:`Q` spans them, far fewer probes reach the same confidence. Deflating
by a larger space never hurts: for :math:`\operatorname{range}Q \subseteq
\operatorname{range}Q'`, :math:`P'AP' = P'(PAP)P'` and compression does not increase the
Frobenius norm.

**Where Q comes from here.** A Lanczos run for the top eigenvalues from a probe
independent of the Hutchinson probes (the pipeline: probe 0 starts Lanczos, probes 1, 2,
… are Hutchinson's — with probe 0 itself the remainder sample would be exactly 0)
already holds :math:`Q_m` and
:math:`AQ_m = Q_mT_m + r e_m^\top` (:math:`r = \beta_m q_{m+1}`): :math:`Q_m^\top AQ_m =
T_m`, so the exact part is :math:`\operatorname{tr}T_m` — the products already paid, not
the Ritz values — and :func:`deflation_from_lanczos` needs no further product. With full
re-orthogonalisation the relation holds to rounding (tested against explicit products).

**The by-products stay unbiased for A itself** (what :func:`~villani.curvature.hutchinson`
computes from the same products, with :math:`y = Pv`, :math:`z = Ay`):

- samples :math:`x = \operatorname{tr}(Q^\top AQ) + y^\top z`;
- ``frob_sq``: :math:`\|A\|_F^2 = \|AQ\|_F^2 + \|AP\|_F^2` and
  :math:`\mathbb E\|z\|^2 = \operatorname{tr}(PA^2P) = \|AP\|_F^2`; :math:`\|AQ\|_F^2 =
  \|T_m\|_F^2 + \beta_m^2` exactly;
- block traces: :math:`\operatorname{tr}A_{bb} = \sum_{i\in b}e_i +
  \mathbb E[y_b^\top z_b]` with the exact :math:`e = \operatorname{diag}(AQQ^\top) =
  \sum_j q_j\odot Aq_j` (:math:`\mathbb E[y\odot z] = \operatorname{diag}(AP)`, and
  :math:`\operatorname{diag}A = \operatorname{diag}(AQQ^\top) + \operatorname{diag}(AP)`);
  over a partition the block samples still sum to the sample;
- ``diag_sq``: :math:`\sum_i A_{ii}^2 = \sum_i e_i^2 + 2\,e\cdot h + \sum_i h_i^2` with
  :math:`h = \operatorname{diag}(AP)`: the middle term from the mean of :math:`y\odot z`,
  the last from cross-products of independent probes;
- the remainder's own ``remainder_frob_sq`` (:math:`\mathbb E\|Pz\|^2 = \|PAP\|_F^2`) and
  ``remainder_diag_sq`` (cross-products of :math:`v\odot Pz`, :math:`\mathbb E = \operatorname{diag}(PAP)`):
  the predicted variance of the deflated samples, and ``frob_sq``/``diag_sq`` that of
  plain Hutchinson, side by side.

Example (two outliers over a flat bulk, trace 198):
    >>> import torch
    >>> from villani.curvature import hutchinson, top_eigenvalues
    >>> U, _ = torch.linalg.qr(torch.randn(50, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    >>> A = (U * torch.tensor([100.0, 50.0] + [1.0] * 48, dtype=torch.float64)) @ U.T
    >>> top = top_eigenvalues(A, 2, num_steps=6, seed=1, keep_basis=True)
    >>> est = hutchinson(A, 8, seed=2, deflation=deflation_from_lanczos(top.lanczos))
    >>> plain = hutchinson(A, 8, seed=2)
    >>> bool(est.std < plain.std / 10), est.num_matvecs
    (True, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..spectrum.ritz import LanczosResult

__all__ = ["Deflation", "deflation_from_products", "deflation_from_lanczos"]


@dataclass(frozen=True, eq=False)
class Deflation:
    r"""The exactly computed part of a deflated trace estimate.

    Attributes:
        basis: :math:`Q^\top`, ``(k, dim)`` orthonormal rows.
        trace: :math:`\operatorname{tr}(Q^\top AQ)`.
        diagonal: :math:`e = \operatorname{diag}(AQQ^\top) = \sum_j q_j\odot Aq_j`
            (float64, on the basis' device); it sums to ``trace``.
        frob_sq: :math:`\|AQ\|_F^2`.
        start_seed: the seed whose probe 0 started the Lanczos run Q comes from (None
            for a basis given with its products): those probes must not be reused.
        vectors: the operator's vector layout (:func:`~villani.curvature.operators.vectors.operator_vectors`)
            when the basis rows are this process's shards; None for whole vectors.
    """

    basis: Tensor
    trace: float
    diagonal: Tensor
    frob_sq: float
    start_seed: int | None = None
    vectors: object | None = None

    @property
    def rank(self) -> int:
        """k, the number of basis vectors."""
        return int(self.basis.shape[0])

    def _coefficients(self, V: Tensor) -> Tensor:
        Q = self.basis
        C = V.to(device=Q.device, dtype=Q.dtype) @ Q.T
        return C if self.vectors is None else self.vectors.sum(C)

    def _expand(self, C: Tensor, like: Tensor) -> Tensor:
        return (C @ self.basis).to(device=like.device, dtype=like.dtype)

    def project(self, V: Tensor) -> Tensor:
        r"""Rows :math:`Pv = v - QQ^\top v` of a ``(b, dim)`` block."""
        return V - self._expand(self._coefficients(V), V)

    def split(self, Z: Tensor) -> tuple[Tensor, Tensor]:
        r"""``(C, PZ)`` with :math:`C = ZQ` (``(b, k)``) and the rows :math:`Pz`."""
        C = self._coefficients(Z)
        return C, Z - self._expand(C, Z)


def _total(vectors, x: Tensor) -> float:
    return float(x if vectors is None else vectors.sum(x))


def deflation_from_products(basis: Tensor, image: Tensor, vectors=None) -> Deflation:
    r"""A :class:`Deflation` from orthonormal rows :math:`Q^\top` and their products
    :math:`(AQ)^\top` (both ``(k, dim)``; with sharded ``vectors``, this process's columns)."""
    if basis.shape != image.shape or basis.ndim != 2:
        raise ValueError(f"basis and image must both be (k, dim); got {tuple(basis.shape)} and {tuple(image.shape)}")
    image = image.to(device=basis.device)
    diag = (basis.double() * image.double()).sum(dim=0)
    return Deflation(basis=basis, trace=_total(vectors, diag.sum()), diagonal=diag,
                     frob_sq=_total(vectors, image.double().square().sum()), vectors=vectors)


def deflation_from_lanczos(run: LanczosResult, shift: float = 0.0, vectors=None) -> Deflation:
    r"""A :class:`Deflation` of :math:`A - \sigma I` (``shift`` = σ) from a Lanczos run of
    :math:`A` that kept its basis (``keep_basis=True``), with no further product.

    :math:`(A-\sigma I)q_j = \beta_{j-1}q_{j-1} + (\alpha_j-\sigma)q_j + \beta_jq_{j+1}`
    (the last column's :math:`\beta_m q_{m+1}` is the stored residual), so

    .. math::
        e = \sum_j (\alpha_j-\sigma)\,q_j\odot q_j + 2\sum_{j<m}\beta_j\,q_j\odot q_{j+1}
            + q_m\odot r,\qquad
        \operatorname{tr} = \sum_i e_i = \sum_j(\alpha_j-\sigma),\qquad
        \|(A-\sigma I)Q\|_F^2 = \|T_m-\sigma I\|_F^2 + \|r\|^2 .

    A run that stopped on an invariant subspace (breakdown) or restarted after one has a
    zero or negligible residual there, and the same relation holds. For an operator with
    sharded vectors pass its layout (``vectors``): the basis and residual are then this
    process's shards and the sums are all-reduced.
    """
    if run.basis is None or run.residual is None:
        raise ValueError("deflation_from_lanczos needs a run that kept its basis (keep_basis=True)")
    Q, r = run.basis, run.residual
    alphas = torch.as_tensor(run.alphas - shift, dtype=torch.float64, device=Q.device)
    betas = torch.as_tensor(run.betas, dtype=torch.float64, device=Q.device)
    m = Q.shape[0]
    diag = torch.zeros(Q.shape[1], dtype=torch.float64, device=Q.device)
    for j in range(m):
        qj = Q[j].double()
        diag += alphas[j] * qj * qj
        if j + 1 < m:
            diag += 2.0 * betas[j] * qj * Q[j + 1].double()
    diag += Q[m - 1].double() * r.double()
    frob = float(alphas.square().sum() + 2.0 * betas.square().sum()) + _total(vectors, r.double().square().sum())
    # Σ_i e_i = Σ_j (α_j − σ) up to the basis' orthonormality (1e-7 in float32): take the trace as Σ e,
    # so that block traces (sums of e over blocks) add up to the samples exactly
    return Deflation(basis=Q, trace=_total(vectors, diag.sum()), diagonal=diag, frob_sq=frob,
                     start_seed=run.start_seed, vectors=vectors)
