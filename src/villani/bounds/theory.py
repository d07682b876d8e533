"""The bounds of section V of the paper, as pure functions (numpy only).

Every function here evaluates a formula of the paper for given numbers; nothing is
measured (the table built from measurements is :mod:`villani.bounds.table`; the PAC-Bayes
bound is :mod:`villani.bounds.pac_bayes`).
``docs/bounds.md`` states each formula as implemented, where the paper is inconsistent,
and what is computed instead.

**Undefined is ``None``.** Every bound needs λ > 0 (the paper's Theorems 1–3 assume it).
For λ = 0 each bound function returns ``None`` — never ``inf``, ``nan`` or 0 — so that
arithmetic on it fails loudly instead of producing a number, JSON stores ``null``, and
:func:`format_value` prints ``"undefined"``. A negative or non-finite λ is a
``ValueError``.

Notation: d parameters, weight decay λ, temperature s of the Villani diagnostic,
inverse temperature β of the Gibbs measure µ ∝ exp(−βF) (the paper sets β = 1/λ),
learning rate η, gradient-noise level σ² = Tr Σ(θ) = E‖ξ‖² (the *total* variance
summed over all d coordinates, as in Theorem 2 — not a per-coordinate variance).

>>> c_ls_upper(1e-2, 1e4)          # (1/λ)(1 + d/λ) = 100 · (1 + 1e6)
100000100.0
>>> c_ls_upper(0.0, 1e4) is None
True
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = [
    "UNDEFINED",
    "positive_lam",
    "require_positive",
    "c_ls_upper",
    "c_p_upper",
    "c_ls_gibbs",
    "eta_max",
    "steps_required",
    "F_STAR_LOWER",
    "envelope_terms",
    "envelope",
    "envelope_check",
    "guideline_checks",
]


UNDEFINED = "undefined"


def positive_lam(lam: float) -> bool:
    """True for λ > 0, False for λ = 0; a negative or non-finite λ is a ValueError."""
    lam = float(lam)
    if not math.isfinite(lam) or lam < 0:
        raise ValueError(f"weight decay lam must be finite and >= 0, got {lam!r}")
    return lam > 0


def require_positive(name: str, value: float) -> float:
    """``value`` as a float; a ValueError naming ``name`` unless it is finite and > 0."""
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return value


# --------------------------------------------------------------------------- constants


def c_ls_upper(lam: float, d: float | np.ndarray, s: float = 1.0) -> float | np.ndarray | None:
    r"""Upper bound on the log-Sobolev constant of the Gibbs measure of F (eq. 21/24).

    .. math:: C_{LS}(F) \le \frac{s}{\lambda}\Big(1 + \frac{d}{\lambda s}\Big)
              = \frac{s}{\lambda} + \frac{d}{\lambda^2}

    ``d`` may be an array (Fig 10 plots the bound against d). ``None`` for λ = 0.

    >>> c_ls_upper(0.5, 3.0, s=2.0)    # (2/0.5)(1 + 3/(0.5·2)) = 4 · 4
    16.0
    """
    s = require_positive("s", s)
    if not positive_lam(lam):
        return None
    lam = float(lam)
    value = (s / lam) * (1.0 + np.asarray(d, dtype=float) / (lam * s))
    return float(value) if np.ndim(value) == 0 else value


def c_p_upper(lam: float, d: float | np.ndarray, s: float = 1.0) -> float | np.ndarray | None:
    r"""Upper bound on the Poincaré constant: :math:`C_P(F) \le C_{LS}(F)`, so the same bound (eq. 21)."""
    return c_ls_upper(lam, d, s)


def c_ls_gibbs(lam: float, d: float, s: float = 1.0, beta: float | None = None) -> float | None:
    r"""Log-Sobolev constant of :math:`\mu \propto e^{-\beta F}`, the one in Theorem 2's contraction.

    The paper (after eq. 30) uses :math:`C_{LS}(\beta F) = \beta^{-1} C_{LS}(F)`; with the
    default β = 1/λ this is :math:`\lambda\,C_{LS}(F) \le s + d/\lambda`.

    >>> c_ls_gibbs(0.5, 3.0, s=2.0)    # β = 2: 16 / 2
    8.0
    """
    c = c_ls_upper(lam, d, s)
    if c is None:
        return None
    beta = 1.0 / float(lam) if beta is None else require_positive("beta", beta)
    return float(c) / beta


# --------------------------------------------------------------------------- Theorem 2


def eta_max(lam: float, sigma_sq: float) -> float | None:
    r"""Largest learning rate Theorem 2 allows (eq. 32): :math:`\eta \le \min(1, \lambda/(4\sigma^2))`.

    σ² = Tr Σ(θ) is the total gradient-noise variance; σ² = 0 gives 1. ``None`` for λ = 0.

    >>> eta_max(1e-3, 0.5)             # min(1, 1e-3 / 2)
    0.0005
    """
    if not positive_lam(lam):
        return None
    sigma_sq = float(sigma_sq)
    if not sigma_sq >= 0:
        raise ValueError(f"sigma_sq must be >= 0, got {sigma_sq!r}")
    if sigma_sq == 0:
        return 1.0
    return min(1.0, float(lam) / (4.0 * sigma_sq))


def steps_required(
    c_ls: float | None,
    eta: float,
    f0_minus_fstar: float,
    eps: float,
    *,
    eps_split: bool = True,
) -> float | None:
    r"""Iterations Theorem 2 asks for to reach :math:`E[F(\theta_T) - F^*] \le \varepsilon`.

    .. math:: T \ge \frac{C_{LS}(F)}{2\eta}\,\log\frac{k\,(F_0 - F^*)}{\varepsilon},
              \qquad k = 2 \text{ (eps\_split, default) or } k = 1

    The statement (eq. 33, and SPEC §3) writes k = 1; the proof after eq. (41) needs
    k = 2, because it spends ε/2 on the contraction term and ε/2 on the noise term, and
    only with k = 2 does the theorem's conclusion follow from its proof. Default k = 2;
    ``eps_split=False`` gives eq. (33) verbatim. Returns the real-valued bound, clipped at
    0 (already within ε); ``None`` when ``c_ls`` is ``None`` (λ = 0).

    >>> round(steps_required(100.0, 0.5, math.e, 2.0), 9)   # 100/(2·0.5) · log(2e/2)
    100.0
    """
    if c_ls is None:
        return None
    c_ls = require_positive("c_ls", c_ls)
    eta = require_positive("eta", eta)
    eps = require_positive("eps", eps)
    gap = float(f0_minus_fstar)
    if gap <= 0:
        return 0.0
    k = 2.0 if eps_split else 1.0
    return max(0.0, c_ls / (2.0 * eta) * math.log(k * gap / eps))


#: A genuine lower estimate of F* = min F: L ≥ 0 (a cross-entropy) and (λ/2)‖θ‖² ≥ 0, so
#: min F ≥ 0. The lowest F seen over a run's checkpoints is an *upper* estimate of min F.
F_STAR_LOWER = 0.0


def envelope_terms(
    steps: float | Sequence[float] | np.ndarray,
    c_ls: float | None,
    eta: float,
    smoothness_L: float,
    sigma_sq: float,
    lam: float,
    *,
    form: str = "paper",
) -> tuple[np.ndarray, float] | None:
    r"""The envelope of eq. (41) as ``(factor, noise)``: envelope(T) = factor(T)·(F₀ − F*) + noise.

    With ρ = 2η / C_LS(βF), C_LS(βF) = λ·C_LS(F) (β = 1/λ):

    - ``form="paper"`` (eq. 41 as printed): factor = λ(1 − ρ)^T, noise = ηLσ²/4;
    - ``form="consistent"`` (eqs. 38 + 40, KL₀ = β(F₀ − F*)): factor = (1 − ρ)^T,
      noise = λ²·C_LS(βF)·ηLσ²/4.

    (1 − ρ)^T is computed as exp(T·log1p(−ρ)) (ρ is ~1e-15 at GPT-Neo sizes). ``None`` for
    λ = 0 or ``c_ls`` None; ρ ≥ 1 (a void contraction) and T < 0 are ValueErrors.
    """
    if not positive_lam(lam) or c_ls is None:
        return None
    lam = float(lam)
    eta = require_positive("eta", eta)
    c_gibbs = lam * require_positive("c_ls", c_ls)
    rho = 2.0 * eta / c_gibbs
    if rho >= 1.0:
        raise ValueError(f"2·eta / C_LS(betaF) = {rho:g} >= 1: the contraction of eq. (37) is void")
    t = np.asarray(steps, dtype=float)
    if np.any(t < 0):
        raise ValueError("steps must be >= 0")
    decay = np.exp(t * math.log1p(-rho))
    noise_paper = eta * float(smoothness_L) * float(sigma_sq) / 4.0
    if form == "paper":
        return lam * decay, noise_paper
    if form == "consistent":
        return decay, lam**2 * c_gibbs * noise_paper
    raise ValueError(f"form must be 'paper' or 'consistent', got {form!r}")


def envelope(
    steps: float | Sequence[float] | np.ndarray,
    f0_minus_fstar: float,
    c_ls: float | None,
    eta: float,
    smoothness_L: float,
    sigma_sq: float,
    lam: float,
    *,
    form: str = "paper",
) -> np.ndarray | None:
    r"""The convergence envelope of eq. (41) with β = 1/λ, over an array of steps T.

    ``c_ls`` is :math:`C_{LS}(F)` (e.g. :func:`c_ls_upper`); the contraction uses
    :math:`C_{LS}(\beta F) = \lambda\, C_{LS}(F)`, ρ = 2η / C_LS(βF).

    ``form="paper"`` — eq. (41) as printed (our reading of the mangled PDF text):

    .. math:: E[F(\theta_T) - F^*] \le \lambda (1-\rho)^T (F_0 - F^*) + \frac{\eta L \sigma^2}{4}

    ``form="consistent"`` — eq. (38) substituted into eq. (40) with β = 1/λ, and
    KL(ν₀‖µ*) replaced by β(F₀ − F*) (the paper's own identification, eq. 39):

    .. math:: E[F(\theta_T) - F^*] \le (1-\rho)^T (F_0 - F^*)
              + \frac{\lambda^2 \eta L \sigma^2\, C_{LS}(\beta F)}{4}

    Neither is proven (docs/bounds.md), and the paper form cannot be a bound: at T = 0
    it gives λ(F₀ − F*) + ηLσ²/4, less than the true F₀ − F* whenever λ < 1 and the
    noise term is small. Computed in log space (:func:`envelope_terms`), so the factor is
    exact to rounding. ``None`` for λ = 0 or ``c_ls`` ``None``.

    >>> envelope([0, 1], 2.0, 10.0, 0.5, 1.0, 1.0, 0.5).round(12).tolist()  # ρ = 2·0.5/(0.5·10) = 0.2
    [1.125, 0.925]
    """
    terms = envelope_terms(steps, c_ls, eta, smoothness_L, sigma_sq, lam, form=form)
    if terms is None:
        return None
    factor, noise = terms
    return factor * float(f0_minus_fstar) + noise


def envelope_check(f_t: float, f0: float, factor: float, noise: float, f_star_low: float,
                   f_star_high: float) -> str:
    r"""Whether F(θ_t) − F* ≤ factor·(F₀ − F*) + noise holds for the unknown F* = min F,
    known only to lie in [``f_star_low``, ``f_star_high``].

    The inequality is F_t − factor·F₀ − noise ≤ (1 − factor)·F*, linear in F*: it
    ``"holds"`` if it holds at both ends of the interval, is ``"violated"`` if it fails at
    both, and is ``"undetermined"`` otherwise. With F*_low = 0 (:data:`F_STAR_LOWER`) and
    F*_high = the lowest F of the run, "holds" and "violated" are certain; the envelope
    evaluated at F*_low alone could neither certify a violation (factor < 1) nor, at
    F*_high alone, certify that it holds.

    >>> envelope_check(1.0, 2.0, 0.5, 0.1, 0.0, 0.8)   # 1 − 1 − 0.1 ≤ 0.5·F* for F* ∈ [0, 0.8]
    'holds'
    >>> envelope_check(2.0, 2.0, 0.5, 0.1, 0.0, 0.8)   # 0.9 > 0.5·0.8
    'violated'
    """
    lhs = float(f_t) - float(factor) * float(f0) - float(noise)
    ends = [(1.0 - float(factor)) * float(f_star_low), (1.0 - float(factor)) * float(f_star_high)]
    if lhs <= min(ends):
        return "holds"
    if lhs > max(ends):
        return "violated"
    return "undetermined"


# --------------------------------------------------------------------------- Table I, Fig 2


def guideline_checks(
    eta: float,
    lam: float,
    sigma_sq: float,
    theta0_sq_norm: float,
    loss0: float,
) -> dict[str, Any]:
    r"""Table I's guidelines: :math:`\eta \lesssim \lambda/(4\sigma^2)` and :math:`\lambda\|\theta_0\|^2 \approx 10\,L(\theta_0)`.

    Returns ``eta``, ``eta_limit`` = λ/(4σ²) (``inf`` for σ² = 0), ``eta_max`` =
    min(1, eta_limit) (Theorem 2), ``eta_ok`` = η <= eta_max, ``lam_theta0`` = λ‖θ₀‖²,
    ``ten_L0`` = 10·L(θ₀), ``lam_theta0_ratio`` = lam_theta0 / ten_L0, ``lam_theta0_ok`` =
    lam_theta0 >= ten_L0. The paper writes "≈"; its stated rationale is that the
    quadratic term dominates at the start, so "ok" means it at least reaches the guideline
    level, and the ratio is reported for the reader to judge closeness. For λ = 0 the η
    check has no meaning (Theorem 2 needs λ > 0): ``eta_limit``, ``eta_max``, ``eta_ok``
    are ``None``; the λ‖θ₀‖² check is still evaluated (0, not ok).
    """
    lam_ok = positive_lam(lam)
    sigma_sq = float(sigma_sq)
    if not sigma_sq >= 0:
        raise ValueError(f"sigma_sq must be >= 0, got {sigma_sq!r}")
    if lam_ok:
        limit = math.inf if sigma_sq == 0 else float(lam) / (4.0 * sigma_sq)
        e_max = eta_max(lam, sigma_sq)
        eta_ok = float(eta) <= e_max
    else:
        limit = e_max = eta_ok = None
    lam_theta0 = float(lam) * float(theta0_sq_norm)
    ten_L0 = 10.0 * float(loss0)
    return {
        "eta": float(eta),
        "sigma_sq": sigma_sq,
        "eta_limit": limit,
        "eta_max": e_max,
        "eta_ok": eta_ok,
        "lam_theta0": lam_theta0,
        "ten_L0": ten_L0,
        "lam_theta0_ratio": lam_theta0 / ten_L0 if ten_L0 > 0 else None,
        "lam_theta0_ok": lam_theta0 >= ten_L0,
    }
