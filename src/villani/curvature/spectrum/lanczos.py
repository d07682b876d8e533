r"""Lanczos tridiagonalisation with full re-orthogonalisation, and Ritz pairs.

From a unit start :math:`q_1`, ``m`` steps build an orthonormal basis
:math:`Q_m=[q_1..q_m]` of the Krylov space
:math:`\mathcal K_m(A,q_1)=\operatorname{span}\{q_1,Aq_1,..,A^{m-1}q_1\}` and the
tridiagonal :math:`T_m = Q_m^\top A Q_m` (diagonal :math:`\alpha`, off-diagonal
:math:`\beta`):

.. math::
    A Q_m = Q_m T_m + \beta_m q_{m+1} e_m^\top .

If :math:`T_m s_i = \theta_i s_i`, the Ritz pair :math:`(\theta_i, y_i = Q_m s_i)` has
residual :math:`\|Ay_i-\theta_i y_i\| = \beta_m |e_m^\top s_i|`, and for symmetric
:math:`A` some eigenvalue lies within that distance of :math:`\theta_i` — the error bar
reported by :func:`top_eigenvalues`.

**Re-orthogonalisation and ghost eigenvalues.** In floating point the three-term
recurrence loses orthogonality as soon as a Ritz value converges (Paige 1971): the
converged direction re-enters the basis and the same eigenvalue is found again — a
"ghost" copy — which inflates multiplicities, breaks the Ritz residual bound, and puts
spurious weight into SLQ densities. Every new vector is therefore re-orthogonalised
against the whole basis by classical Gram–Schmidt, with a second pass whenever the first
removed most of the vector (Kahan–Parlett "twice is enough": then orthogonality holds to
machine precision). This costs ``m`` stored vectors (``m × dim`` floats)
and :math:`O(m^2\,\text{dim})` flops, negligible next to ``m`` Hessian-vector products;
the basis can live off the operator's device (``basis_device="cpu"``) or in a narrower
dtype (``basis_dtype=torch.bfloat16``) for large models.

**Breakdown.** If :math:`\beta_j \le \text{tol}\cdot\|Aq_j\|` the Krylov space is
(numerically) invariant: its Ritz values are exact eigenvalues. The run then stops
(``breakdown=True``), or, with ``restart_on_breakdown``, continues from a fresh random
vector orthogonal to the basis, recording :math:`\beta_j = 0` (so :math:`T` becomes
block-diagonal and stays :math:`Q^\top A Q`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy.linalg import eigh_tridiagonal
from torch import Tensor

from ..operators.linear import as_operator, operator_device, operator_dtype
from ..operators.vectors import LocalVectors, operator_vectors
from .ritz import EigenResult, LanczosResult

__all__ = ["lanczos", "top_eigenvalues"]


def _orthogonalize(w: Tensor, basis: Tensor, vectors=None) -> Tensor:
    """Remove from ``w`` its components along the rows of ``basis``: classical Gram–Schmidt,
    repeated once more only when the first pass cancelled most of ``w`` (‖w'‖ < ‖w‖/√2,
    the "twice is enough" criterion of Kahan and Parlett). With sharded ``vectors`` the
    coefficients ``basis @ w`` are summed over the shards (one all-reduce per pass)."""
    if basis.shape[0] == 0:
        return w
    vectors = vectors or LocalVectors(w.shape[-1])
    for _ in range(2):
        before = vectors.norm(w)
        coeff = vectors.sum(basis @ w.to(device=basis.device, dtype=basis.dtype))
        w = w - (coeff @ basis).to(device=w.device, dtype=w.dtype)
        if vectors.norm(w) >= 0.7071 * before:
            break
    return w


def _largest_ritz(alphas: list[float], betas: list[float]) -> float:
    """Largest eigenvalue of the tridiagonal matrix with diagonal ``alphas`` and off-diagonal ``betas``."""
    n = len(alphas)
    T = np.diag(np.asarray(alphas)) + np.diag(np.asarray(betas[: n - 1]), 1) + np.diag(np.asarray(betas[: n - 1]), -1)
    return float(np.linalg.eigvalsh(T)[-1])


def lanczos(
    op,
    num_steps: int,
    *,
    seed: int = 0,
    v0: Tensor | None = None,
    keep_basis: bool = False,
    basis_device: torch.device | str | None = None,
    basis_dtype: torch.dtype | None = None,
    reorthogonalize: bool = True,
    restart_on_breakdown: bool = False,
    breakdown_tol: float | None = None,
    stop: Callable[[np.ndarray, np.ndarray, float], bool] | None = None,
    callback=None,
) -> LanczosResult:
    r"""Run ``num_steps`` Lanczos steps on the symmetric operator ``op``.

    Args:
        op: a linear operator, square tensor, or ``(callable, dim)`` pair.
        num_steps: number of steps m (= matvecs); capped at ``op.dim``.
        seed: seed of the Rademacher start vector (used when ``v0`` is None) and of
            restart vectors.
        v0: start vector (normalised here).
        keep_basis: return the basis ``(m, dim)`` in the result.
        basis_device: where the basis is stored (default: the operator's device).
        basis_dtype: dtype of the stored basis (default: the operator's dtype).
        reorthogonalize: full re-orthogonalisation (default). ``False`` runs the plain
            three-term recurrence with O(dim) memory — ghost eigenvalues will appear.
        restart_on_breakdown: continue after an invariant subspace with a fresh
            random vector (used for eigenvalues; SLQ stops instead).
        breakdown_tol: relative breakdown threshold (default ``50 * eps(dtype)``).
        stop: optional test ``stop(alphas, betas, beta) -> bool`` called after every step
            with :math:`T_j` and :math:`\beta_j`; the run ends at the first True (e.g.
            :func:`top_eigenvalues`' residual tolerance).
        callback: optional ``callback(done, total, largest)`` after every matvec: steps
            done, the step count m, and the largest Ritz value of :math:`T_j` so far (the
            running estimate of :math:`\lambda_{\max}`). For progress reports.

    Returns:
        A :class:`LanczosResult` (``alphas``, ``betas``, ``beta_last``, optional basis and,
        with it, the last residual :math:`\beta_m q_{m+1}`).
        For an operator with sharded vectors (``op.vectors``) ``v0``, the basis and the
        residual are this process's shards and every inner product is summed over the shards.
    """
    op = as_operator(op)
    if num_steps < 1:
        raise ValueError(f"num_steps must be ≥ 1, got {num_steps}")
    m = min(int(num_steps), op.dim)
    dtype, device = operator_dtype(op), operator_device(op)
    b_device = torch.device(basis_device) if basis_device is not None else device
    b_dtype = basis_dtype or dtype
    tol = breakdown_tol if breakdown_tol is not None else 50.0 * torch.finfo(dtype).eps
    vectors = operator_vectors(op)  # sharded vectors: local entries, inner products all-reduced
    stream = vectors.probes(seed, dtype=dtype, device=device)

    q = stream.next(1)[0] if v0 is None else v0.to(device=device, dtype=dtype).flatten().clone()
    if q.numel() != vectors.local_dim:
        raise ValueError(f"v0 has {q.numel()} entries, operator dim is {op.dim} ({vectors.local_dim} held here)")
    q = q / vectors.norm(q)

    store = reorthogonalize or keep_basis
    basis = torch.empty((m if store else 0, vectors.local_dim), device=b_device, dtype=b_dtype)
    alphas, betas, beta_last, residual, restarts, breakdown = _recurrence(
        op, q, m, basis, vectors, stream, store=store, reorthogonalize=reorthogonalize,
        restart_on_breakdown=restart_on_breakdown, tol=tol, stop=stop, callback=callback)
    steps = len(alphas)
    return LanczosResult(
        alphas=np.asarray(alphas, dtype=np.float64),
        betas=np.asarray(betas[: steps - 1], dtype=np.float64),
        beta_last=float(beta_last),
        num_matvecs=steps,
        basis=basis[:steps] if keep_basis else None,
        restarts=restarts,
        breakdown=breakdown,
        start_seed=int(seed) if v0 is None else None,
        residual=residual.to(device=b_device, dtype=b_dtype) if keep_basis and residual is not None else None,
    )


def _recurrence(op, q: Tensor, m: int, basis: Tensor, vectors, stream, *, store: bool, reorthogonalize: bool,
                restart_on_breakdown: bool, tol: float, stop, callback):
    """The Lanczos steps of :func:`lanczos` from the unit vector ``q``, writing the basis rows
    into ``basis`` (when ``store``). Returns ``(alphas, betas, beta_last, residual, restarts,
    breakdown)``."""
    alphas: list[float] = []
    betas: list[float] = []
    q_prev, beta_prev = None, 0.0
    restarts, breakdown, beta_last = 0, False, 0.0
    residual = None
    for j in range(m):
        if store:
            basis[j] = q.to(device=basis.device, dtype=basis.dtype)
        w = op.matvec(q)
        norm_aq = float(vectors.norm(w))
        alpha = float(vectors.dot(q, w))
        alphas.append(alpha)
        if callback is not None:
            callback(j + 1, m, _largest_ritz(alphas, betas))
        w = w - alpha * q
        if q_prev is not None:
            w = w - beta_prev * q_prev
        if reorthogonalize:
            w = _orthogonalize(w, basis[: j + 1], vectors)
        beta = float(vectors.norm(w))
        if j == m - 1 or (stop is not None and stop(np.asarray(alphas), np.asarray(betas), beta)):
            beta_last, residual = beta, w
            break
        if beta <= tol * norm_aq:
            if not restart_on_breakdown:
                beta_last, breakdown, residual = beta, True, w
                break
            restarts += 1
            r = _orthogonalize(stream.next(1)[0], basis[: j + 1], vectors)
            q_prev, q = None, r / vectors.norm(r)
            betas.append(0.0)
            beta_prev = 0.0
            continue
        betas.append(beta)
        q_prev, q, beta_prev = q, w / beta, beta
    return alphas, betas, beta_last, residual, restarts, breakdown


def top_eigenvalues(
    op,
    k: int,
    *,
    num_steps: int,
    seed: int = 0,
    return_vectors: bool = False,
    keep_basis: bool = False,
    tol: float | None = None,
    basis_device: torch.device | str | None = None,
    basis_dtype: torch.dtype | None = None,
    callback=None,
) -> EigenResult:
    r"""The ``k`` largest (algebraic) eigenvalues of ``op`` by Lanczos, with error bars.

    Runs :func:`lanczos` for ``num_steps`` steps (full re-orthogonalisation, restart on
    breakdown) and returns the ``k`` largest Ritz values of :math:`T_m` with residual
    norms :math:`\beta_m|s_{m,i}|`. Extreme, well-separated eigenvalues converge first;
    a residual small compared to the gap to the next Ritz value means the value is
    accurate to about residual²/gap.

    The run starts from the first Rademacher probe of ``seed`` and is returned as
    ``.lanczos``: its :math:`T_m` is also the Gauss quadrature of the spectral measure at
    that start, so ``slq(op, p, m', seed=seed, first=result.lanczos)`` reuses it as SLQ's
    first start — one Lanczos run serves both the top-k and the density.

    With ``tol`` the run stops early, at the first step ``j ≥ k`` where every one of the
    ``k`` largest Ritz values has relative residual :math:`\beta_j|s_{j,i}|/|\theta_i|
    \le` ``tol`` (each then lies within ``tol`` of an eigenvalue, relatively);
    ``num_steps`` is the most it may take. The test costs one ``j × j`` tridiagonal
    eigen-decomposition per step, nothing next to a product.

    Args:
        op: a linear operator, square tensor, or ``(callable, dim)`` pair.
        k: number of eigenvalues.
        num_steps: Lanczos steps (≥ k; 3k or more is typical); the maximum with ``tol``.
        seed: start-vector seed.
        return_vectors: also return the Ritz vectors (keeps the basis).
        keep_basis: keep the Lanczos basis and last residual in ``.lanczos`` (for
            :func:`~villani.curvature.deflation_from_lanczos`).
        tol: relative residual at which to stop (None: always ``num_steps``).
        basis_device, basis_dtype, callback: see :func:`lanczos`.
    """
    op = as_operator(op)
    if not 1 <= k <= min(num_steps, op.dim):
        raise ValueError(f"need 1 ≤ k ≤ min(num_steps, dim); got k={k}, num_steps={num_steps}, dim={op.dim}")
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be positive, got {tol!r}")

    def converged(alphas: np.ndarray, betas: np.ndarray, beta: float) -> bool:
        if alphas.size < k:
            return False
        theta, s = eigh_tridiagonal(alphas, betas) if alphas.size > 1 else (alphas, np.ones((1, 1)))
        top = np.argsort(theta)[::-1][:k]
        return bool(np.all(beta * np.abs(s[-1, top]) <= tol * np.abs(theta[top])))

    res = lanczos(
        op,
        num_steps,
        seed=seed,
        keep_basis=return_vectors or keep_basis,
        basis_device=basis_device,
        basis_dtype=basis_dtype,
        restart_on_breakdown=True,
        stop=converged if tol is not None else None,
        callback=callback,
    )
    theta, s = res.ritz()
    order = np.argsort(theta)[::-1][:k]
    residuals = np.abs(res.beta_last * s[-1, order])
    vectors = None
    if return_vectors:
        coeffs = torch.as_tensor(s[:, order].T.copy(), dtype=res.basis.dtype, device=res.basis.device)
        vectors = coeffs @ res.basis
    return EigenResult(values=theta[order].copy(), residuals=residuals, num_matvecs=res.num_matvecs, vectors=vectors,
                       lanczos=res)
