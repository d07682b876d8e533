r"""The PAC-Bayes bound of the paper's eq. (43–44) and Corollary 2 (eq. 52), as pure functions
of numbers (``docs/bounds.md``); λ and the other arguments checked as in
:mod:`villani.bounds.theory`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from villani.bounds.theory import positive_lam, require_positive

__all__ = ["PacBayes", "kl_upper", "pac_bayes_complexity", "pac_bayes_bound", "pac_bayes"]


def kl_upper(
    F_hat: float,
    d: float,
    lam: float,
    beta: float | None = None,
    *,
    form: str = "eq44",
) -> float | None:
    r"""The paper's upper bound on KL(δ_θ̂ ‖ µ_F), *unclamped* (it can be negative).

    ``form="eq44"`` (default, SPEC §3), with β = 1/λ unless given:

    .. math:: \mathrm{KL} \le \beta F(\hat\theta) + \frac d2 \log\Big(1+\frac\beta\lambda\Big)
              + K_0,\qquad K_0 = \frac d2 \log\frac{\lambda}{2\pi\beta}

    ``form="eq52"`` — Corollary 2 as printed, whose middle term is (d/2) log 2 (that is
    β/λ = 1, i.e. β = λ) while K₀ = (d/2) log(λ²/2π) uses β = 1/λ:

    .. math:: \mathrm{KL} \le \lambda^{-1} F(\hat\theta) + \frac d2 \log 2 + \frac d2 \log\frac{\lambda^2}{2\pi}

    For β = 1/λ the two d/2 terms of eq. (44) add to (d/2) log((1 + λ²)/2π) < 0, about
    −0.92 d: for GPT-Neo sizes the "bound" is hugely negative, which no KL can be.
    ``None`` for λ = 0.

    >>> round(kl_upper(2.0, 2.0, 1.0), 12) == round(2.0 + math.log(2) + math.log(1 / (2 * math.pi)), 12)
    True
    """
    if not positive_lam(lam):
        return None
    lam = float(lam)
    F_hat, d = float(F_hat), float(d)
    if form == "eq44":
        beta = 1.0 / lam if beta is None else require_positive("beta", beta)
        k0 = 0.5 * d * math.log(lam / (2.0 * math.pi * beta))
        return beta * F_hat + 0.5 * d * math.log1p(beta / lam) + k0
    if form == "eq52":
        if beta is not None:
            raise ValueError("form='eq52' fixes beta = 1/lam")
        return F_hat / lam + 0.5 * d * math.log(2.0) + 0.5 * d * math.log(lam**2 / (2.0 * math.pi))
    raise ValueError(f"form must be 'eq44' or 'eq52', got {form!r}")


def pac_bayes_complexity(kl: float, n: int, delta: float, loss_range: float = 1.0) -> float:
    r"""The complexity term of eq. (43): :math:`b\sqrt{(\mathrm{KL} + \log(2\sqrt n/\delta)) / (2(n-1))}`.

    b = ``loss_range`` is 1 in the paper; the bound form it quotes holds for losses in
    [0, 1], so a loss in [0, b] scales the term by b (cross-entropy is unbounded; b = 1
    is the paper's choice, not a guarantee). ``kl`` must be >= 0 (clamp first).
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if not 0.0 < float(delta) < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if not float(kl) >= 0:
        raise ValueError(f"kl must be >= 0 (clamp it first), got {kl!r}")
    loss_range = require_positive("loss_range", loss_range)
    return loss_range * math.sqrt((float(kl) + math.log(2.0 * math.sqrt(n) / float(delta))) / (2.0 * (n - 1)))


def pac_bayes_bound(risk_hat: float, kl: float, n: int, delta: float, loss_range: float = 1.0) -> float:
    r"""Eq. (43): :math:`R(\hat\theta) \le \hat R(\hat\theta) + \sqrt{(\mathrm{KL} + \log(2\sqrt n/\delta))/(2(n-1))}` (nats).

    >>> n, delta = 101, 0.05           # sqrt((3 + log(2·√101/0.05)) / 200)
    >>> expected = 1 + math.sqrt((3 + math.log(40 * math.sqrt(101))) / 200)
    >>> abs(pac_bayes_bound(1.0, 3.0, n, delta) - expected) < 1e-15
    True
    """
    return float(risk_hat) + pac_bayes_complexity(kl, n, delta, loss_range)


@dataclass(frozen=True)
class PacBayes:
    """PAC-Bayes bound at one checkpoint (eq. 43–44/52, β = 1/λ by default).

    Risks are in nats per token. ``undefined`` (λ = 0): every numeric field and every
    flag is ``None``. Otherwise:

    - ``kl_raw``: the paper's KL bound, unclamped (may be < 0);
    - ``kl_used = max(kl_raw, 0)``; ``kl_clamped``: kl_raw < 0 was replaced by 0 — the
      bound is then *not* a certified bound, only what any KL >= 0 would give at least;
    - ``ppl_bound = exp(risk_bound)`` (``inf`` on overflow);
    - ``vacuous``: risk_bound >= log(vocab_size), i.e. ppl_bound >= vocab_size: the bound
      says no more than a uniform guess over the vocabulary.
    """

    risk_hat: float
    n: int
    delta: float
    beta: float | None
    kl_raw: float | None
    kl_used: float | None
    kl_clamped: bool | None
    complexity: float | None
    risk_bound: float | None
    ppl_bound: float | None
    vacuous: bool | None
    undefined: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pac_bayes(
    risk_hat: float,
    F_hat: float,
    d: float,
    lam: float,
    *,
    n: int,
    delta: float,
    vocab_size: int,
    beta: float | None = None,
    form: str = "eq44",
    loss_range: float = 1.0,
) -> PacBayes:
    """Eq. (43) with the KL of :func:`kl_upper`, clamped at 0 and flagged; see :class:`PacBayes`.

    ``risk_hat`` is the empirical risk R̂ = L(θ̂) (mean token cross-entropy, no penalty),
    ``F_hat`` the regularised objective F(θ̂) = L + (λ/2)‖θ̂‖², ``n`` the sample count.
    """
    if int(vocab_size) < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size!r}")
    kl_raw = kl_upper(F_hat, d, lam, beta, form=form)
    if kl_raw is None:
        return PacBayes(
            float(risk_hat), int(n), float(delta), None,
            None, None, None, None, None, None, None, True,
        )  # fmt: skip
    used_beta = 1.0 / float(lam) if beta is None else float(beta)
    kl_used = max(kl_raw, 0.0)
    complexity = pac_bayes_complexity(kl_used, n, delta, loss_range)
    risk_bound = float(risk_hat) + complexity
    try:
        ppl_bound = math.exp(risk_bound)
    except OverflowError:
        ppl_bound = math.inf
    vacuous = risk_bound >= math.log(int(vocab_size))
    return PacBayes(
        float(risk_hat), int(n), float(delta), used_beta,
        kl_raw, kl_used, kl_raw < 0, complexity, risk_bound, ppl_bound, vacuous, False,
    )  # fmt: skip
