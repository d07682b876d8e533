r"""Fig 6 (Sec. VI-F) and Corollary 2 (eq. 52): the PAC-Bayes bound, decided by its own formula.

Every row here is of class *arithmetic*: eq. (52) evaluated by the bound code
(:func:`villani.bounds.pac_bayes.kl_upper`, ``form="eq52"``) at the paper's d, λ and n
(Table II: 887k PTB tokens), δ = 0.05 (the paper gives none; log(2√n/δ) ≈ 10 nats, nothing
beside d-sized terms) and a deliberately generous model — training loss ln V (the largest
F̂ of any model) and ‖θ‖² = d (every weight of size 1, above any trained GPT-Neo's). Its
square-root argument

.. math:: A(\lambda, d) = \frac{\hat F}{\lambda} + \frac d2\log 2 + \frac d2\log\frac{\lambda^2}{2\pi}
          + \log\frac{2\sqrt n}{\delta}, \qquad \hat F = \hat L + \frac\lambda2\|\theta\|^2,

is ≈ (d/2)(‖θ‖²/d − log(π/λ²)): negative unless every weight is of size √log(π/λ²) ≈ 3–4.
So eq. (52) gives no bound at the paper's λ (no ratio 1.12–1.43, no R² ≈ 0.93); where it
would exist, A grows with λ by d·log(λ₂/λ₁) (the bound loosens with λ), is linear in d
through K₀ and (d/2)·log 2, and its λ-dependence beside the logarithm is L̂/λ: the
complexity √(A/2(n−1)) decays at most as λ^(−1/2), not quadratically.
"""

from __future__ import annotations

import math

import numpy as np

from villani.bounds.pac_bayes import kl_upper
from villani.claims.catalogue.context import Context, arithmetic
from villani.claims.catalogue.paper import PAPER_D, PAPER_LAMBDAS, PTB_TOKENS_TABLE2, init_loss
from villani.claims.catalogue.registry import ARITHMETIC, Measured, claim
from villani.claims.catalogue.verdict import Region
from villani.curvature import regularised_loss
from villani.statistics.intervals import exact_value

DELTA = 0.05
GENEROUS = "L̂ = ln V, ‖θ‖² = d"


def eq52_argument(lam: float, d: float = PAPER_D, *, theta_sq: float | None = None, loss: float | None = None,
                  n: int = PTB_TOKENS_TABLE2, delta: float = DELTA) -> float:
    """A(λ, d) of the module docstring: eq. (52)'s KL bound plus log(2√n/δ) (default: the generous model)."""
    loss = init_loss() if loss is None else loss
    theta_sq = d if theta_sq is None else theta_sq
    return kl_upper(regularised_loss(loss, theta_sq, lam), d, lam, form="eq52") + math.log(2 * math.sqrt(n) / delta)


def _no_bound(name: str) -> Measured:
    lam = PAPER_LAMBDAS[name]
    a = eq52_argument(lam)
    need = math.log(math.pi / lam**2)
    return arithmetic(a / PAPER_D, f"eq. (52) at λ = {lam:g}, d = 1.25·10⁸, n = 887k, δ = 0.05, {GENEROUS}",
                      f"wrong at any scale: eq. (52)'s square-root argument is {a:.3g} < 0 — no bound exists, so no "
                      f"bound/perplexity ratio; it is ≥ 0 only if ‖θ‖²/d ≥ log(π/λ²) = {need:.3g} (every weight of "
                      f"size ≥ {math.sqrt(need):.2g})")


@claim("fig6_ratio_weak", "Fig 6, Sec. VI-F", "Bound/perplexity ratio 1.43× under weak regularisation (λ = 10⁻⁴)",
       "1.43", f"eq. (52)'s square-root argument / d at λ = 10⁻⁴, d = 1.25·10⁸, n = 887k ({GENEROUS}); a bound, and so "
       "a ratio, exists only if ≥ 0 (arithmetic)", Region(0.0, math.inf, text="≥ 0 (a bound to have a ratio)"),
       basis=ARITHMETIC)
def fig6_ratio_weak(ctx: Context) -> Measured:
    return _no_bound("weak")


@claim("fig6_ratio_strong", "Fig 6, Sec. VI-F", "Bound/perplexity ratio 1.12× under strong regularisation "
       "(λ = 10⁻²)", "1.12", f"eq. (52)'s square-root argument / d at λ = 10⁻², d = 1.25·10⁸, n = 887k ({GENEROUS}); "
       "a bound exists only if ≥ 0 (arithmetic)", Region(0.0, math.inf, text="≥ 0 (a bound to have a ratio)"),
       basis=ARITHMETIC)
def fig6_ratio_strong(ctx: Context) -> Measured:
    return _no_bound("strong")


@claim("fig6_r2", "Fig 6, Sec. VI-F", "R² ≈ 0.93 between the bound and validation perplexity", "0.93",
       f"fraction of the paper's λ > 0 at which eq. (52) is a real number ({GENEROUS}, d = 1.25·10⁸; arithmetic)",
       Region(1.0, 1.0, text="= 1 (a bound at every point to correlate)"), basis=ARITHMETIC)
def fig6_r2(ctx: Context) -> Measured:
    args = {name: eq52_argument(lam) for name, lam in PAPER_LAMBDAS.items() if lam > 0}
    ok = sum(a >= 0 for a in args.values())
    text = ", ".join(f"λ = {PAPER_LAMBDAS[k]:g}: {a:.3g}" for k, a in args.items())
    return arithmetic(ok / len(args), "eq. (52)'s square-root argument at each λ > 0",
                      f"wrong at any scale: the argument is {text} — negative at every λ, so there is no bound to "
                      "correlate with perplexity; the R² cannot come from eq. (52)")


@claim("fig6_tightens_with_lam", "Fig 6, Sec. VI-F, Theorem 3", "As λ increases the bound tightens",
       "tighter at larger λ", "smallest (A(10⁻², θ₂) − A(10⁻⁴, θ₁))/d: the change of eq. (52)'s square-root argument "
       "from the weak to the strong λ over any two models with training loss in [0, ln V] and ‖θ‖² in [0, d] (each λ "
       "its own trained model; arithmetic)", Region.direction(-1), basis=ARITHMETIC)
def fig6_tightens(ctx: Context) -> Measured:
    r"""A(λ, θ) = L̂/λ + ‖θ‖²/2 + (d/2)·log 2 + (d/2)·log(λ²/2π) + log(2√n/δ), so the strong λ's
    argument exceeds the weak λ's by at least d·log(λ₂/λ₁) − d/2 − ln V/λ₁ (strong: L̂ = ‖θ‖ = 0;
    weak: L̂ = ln V, ‖θ‖² = d) — positive, whatever the two trained models are."""
    weak, strong = PAPER_LAMBDAS["weak"], PAPER_LAMBDAS["strong"]
    v = (eq52_argument(strong, theta_sq=0.0, loss=0.0) - eq52_argument(weak)) / PAPER_D
    fixed = (eq52_argument(strong) - eq52_argument(weak)) / PAPER_D
    return arithmetic(v, "eq. (52) at λ = 10⁻² with L̂ = 0, ‖θ‖ = 0 against λ = 10⁻⁴ with L̂ = ln V, ‖θ‖² = d",
                      f"wrong at any scale: even with the strong λ's model at zero loss and zero norm and the weak λ's "
                      f"at ln V and ‖θ‖² = d, A rises by {v:.3g}·d from λ = 10⁻⁴ to 10⁻² ({fixed:.3g}·d at one fixed "
                      "model): (d/2)·log λ² grows with λ by d·log 100 while every other term moves by at most d/2 + "
                      "ln V/λ — so where the bound exists it loosens with λ")


def lam_exponent(lo: float = 1e-4, hi: float = 1e-3) -> float:
    """The exponent p of eq. (52)'s complexity √(A/2(n−1)) ∝ λ^p from its λ-power terms alone
    (A without its d-sized logarithmic terms: d = 0, ‖θ‖ = 0, L̂ = ln V)."""
    a = [eq52_argument(lam, 0.0, theta_sq=0.0) for lam in (lo, hi)]
    return 0.5 * math.log(a[1] / a[0]) / math.log(hi / lo)


@claim("fig6_quadratic_in_lam", "Sec. V-C, Corollary 2", "The bound decays quadratically with λ", "∝ λ⁻²",
       "exponent p of the complexity term √(A/2(n − 1)) ∝ λ^p from eq. (52)'s power terms in λ (λ = 10⁻⁴ … 10⁻³; "
       "arithmetic)", Region.around(-2.0, 0.25), basis=ARITHMETIC)
def fig6_quadratic(ctx: Context) -> Measured:
    p = lam_exponent()
    return arithmetic(p, "eq. (52) with d = 0, ‖θ‖ = 0, L̂ = ln V at λ = 10⁻⁴ and 10⁻³",
                      f"wrong at any scale: the only power of λ in eq. (52) is L̂/λ, so the complexity decays as "
                      f"λ^{p:.2f} (→ −1/2); (d/2)·log(λ²/2π) is logarithmic in λ and *grows*")


@claim("eq52_log_d", "Sec. V-C, Corollary 2", "The bound's dependence on d is only logarithmic", "log d",
       "log-log slope of |A| in d between d = 1.25·10⁸ and 1.25·10⁹ at λ = 10⁻², L̂ = ln V, ‖θ‖² = 10⁸ (App. B's "
       "‖θ‖ = 10⁴; arithmetic)", Region(-math.inf, 0.2, text="≤ 0.2 (a logarithm's slope is 1/log d ≈ 0.05)"),
       basis=ARITHMETIC)
def eq52_log_d(ctx: Context) -> Measured:
    lam = PAPER_LAMBDAS["strong"]
    a = [abs(eq52_argument(lam, d, theta_sq=1e8)) for d in (PAPER_D, 10 * PAPER_D)]
    slope = float(np.log10(a[1] / a[0]))
    return arithmetic(slope, "eq. (52) at d = 1.25·10⁸ and 1.25·10⁹",
                      f"wrong at any scale: K₀ = (d/2)·log(λ²/2π) and (d/2)·log 2 are linear in d (slope {slope:.3g})")


@claim("fig6_below_diagonal_conservative", "Fig 6 caption", "Points below the diagonal y = x indicate conservative "
       "(loose) bounds", "below = conservative", "an upper bound y on perplexity x is conservative iff y ≥ x, i.e. on "
       "or above the diagonal: the fraction of the below-diagonal half-plane where y ≥ x", Region(1.0, 1.0, text="= 1"),
       basis=ARITHMETIC)
def fig6_caption(ctx: Context) -> Measured:
    return Measured(exact_value(0.0, "arithmetic: below the diagonal y < x, so the bound is violated there"),
                    "the definition of an upper bound (any scale)",
                    "wrong at any scale: a point below y = x is a bound *below* the observed perplexity — a violated "
                    "bound, not a conservative one")
