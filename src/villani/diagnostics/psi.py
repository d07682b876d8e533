r"""The Villani diagnostic Ψ_s — its formula, its confidence interval and its names, once.

For :math:`F(\theta) = L(\theta) + \frac\lambda2\|\theta\|^2` on :math:`\mathbb R^d`
(paper eq. 25):

.. math::
    \Psi_s(\theta) = -\Delta F(\theta) + \frac{\|\nabla F(\theta)\|^2}{s},\qquad
    \Delta F = \operatorname{tr}\nabla^2 L + \lambda d,\qquad
    \|\nabla F\|^2 = \|\nabla L\|^2 + 2\lambda\,\theta\cdot\nabla L + \lambda^2\|\theta\|^2 .

Only :math:`\operatorname{tr}\nabla^2 L` is estimated (Hutchinson); everything else is
exact, so a 95% interval :math:`[t_{lo}, t_{hi}]` of the trace maps to the interval
:math:`[-(t_{hi}+\lambda d) + g/s,\; -(t_{lo}+\lambda d) + g/s]` of Ψ_s (Ψ_s decreases in
the trace). Every stage that assembles Ψ_s — the checkpoint measurement, the radial rays,
``villani diagnose`` — calls :func:`psi_s`; every file names it through :func:`psi_key`
(the key in a measure JSON's ``psi_s`` mapping) and :func:`psi_column` (the column in
tables and CSVs).

**Ψ_s as a function of λ.** At a fixed θ, :math:`\Delta F` is affine and
:math:`\|\nabla F\|^2` quadratic in λ (:func:`grad_F_sq`), so

.. math::
    \Psi_s(\lambda) = \frac{\|\theta\|^2}{s}\lambda^2
    + \Big(\frac{2\,\theta\cdot\nabla L}{s} - d\Big)\lambda
    + \Big(\frac{\|\nabla L\|^2}{s} - \operatorname{tr}\nabla^2L\Big)

for every λ follows from one measurement of :math:`\operatorname{tr}\nabla^2L`,
:math:`\|\nabla L\|^2`, :math:`\theta\cdot\nabla L` and :math:`\|\theta\|^2`
(:func:`psi_coefficients`; its curve and sign changes: :mod:`villani.measure.diagnose`).
"""

from __future__ import annotations

import math

__all__ = ["psi_key", "psi_column", "laplacian_F", "grad_F_sq", "psi_s", "psi_s_interval",
           "psi_coefficients", "psi_slope_reference"]


def psi_key(s: float) -> str:
    """Key of Ψ_s in a measure JSON's ``psi_s`` mapping: ``str(float(s))`` (``"1.0"``)."""
    return str(float(s))


def psi_column(s: float) -> str:
    """Column of Ψ_s in tables and CSVs: ``psi_s=<psi_key(s)>``."""
    return f"psi_s={psi_key(s)}"


def laplacian_F(trace_L: float, lam: float, d: int) -> float:
    r""":math:`\Delta F = \operatorname{tr}\nabla^2L + \lambda d` (∇²R = λI exactly)."""
    return float(trace_L) + float(lam) * int(d)


def grad_F_sq(grad_L_sq: float, theta_dot_grad_L: float, theta_sq: float, lam: float) -> float:
    r""":math:`\|\nabla F\|^2 = \|\nabla L + \lambda\theta\|^2 = \|\nabla L\|^2 + 2\lambda\,\theta\cdot\nabla L
    + \lambda^2\|\theta\|^2` (θ and the dot products over the regularised parameters)."""
    lam = float(lam)
    return float(grad_L_sq) + 2.0 * lam * float(theta_dot_grad_L) + lam * lam * float(theta_sq)


def psi_coefficients(trace_L: float, grad_L_sq: float, theta_dot_grad_L: float, theta_sq: float, d: int,
                     s: float) -> tuple[float, float, float]:
    r"""``(a, b, c)`` with :math:`\Psi_s(\lambda) = a\lambda^2 + b\lambda + c`:
    :math:`a = \|\theta\|^2/s`, :math:`b = 2\,\theta\cdot\nabla L/s - d`,
    :math:`c = \|\nabla L\|^2/s - \operatorname{tr}\nabla^2L` (the same polynomial as
    :func:`psi_s` with :func:`grad_F_sq`)."""
    s = float(s)
    return float(theta_sq) / s, 2.0 * float(theta_dot_grad_L) / s - int(d), float(grad_L_sq) / s - float(trace_L)


def psi_s(trace_L: float, grad_F_sq: float, lam: float, d: int, s: float) -> float:
    r""":math:`\Psi_s = -(\operatorname{tr}\nabla^2L + \lambda d) + \|\nabla F\|^2/s`."""
    return -laplacian_F(trace_L, lam, d) + float(grad_F_sq) / float(s)


def psi_s_interval(trace_ci: tuple[float, float] | None, grad_F_sq: float, lam: float, d: int,
                   s: float) -> list[float] | None:
    """The interval of Ψ_s from a trace interval ``(lo, hi)`` (None when the trace has none)."""
    if trace_ci is None or any(not math.isfinite(float(x)) for x in trace_ci):
        return None
    lo, hi = trace_ci
    return [psi_s(hi, grad_F_sq, lam, d, s), psi_s(lo, grad_F_sq, lam, d, s)]


def psi_slope_reference(lam: float, s: float = 1.0) -> dict[str, float]:
    r"""Reference slopes of Ψ_s against ‖θ‖² (Fig 2).

    ``asymptote`` = λ²/s — the large-‖θ‖ slope of ‖∇F‖²/s ≈ ‖λθ‖²/s, which the paper
    quotes; ``lemma4_lower`` = λ²/(2s) — what Lemma 4 (eq. 19) actually proves, as a lower
    bound. Both are 0 for λ = 0 (a prediction, not an undefined bound).
    """
    lam, s = float(lam), float(s)
    if not math.isfinite(lam) or lam < 0:
        raise ValueError(f"weight decay lam must be finite and >= 0, got {lam!r}")
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"s must be finite and > 0, got {s!r}")
    return {"asymptote": lam ** 2 / s, "lemma4_lower": lam ** 2 / (2.0 * s)}
