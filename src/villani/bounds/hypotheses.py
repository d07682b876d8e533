"""The hypotheses the bounds of :mod:`villani.bounds.table` rest on, checked per checkpoint.

:data:`HYPOTHESES` names each (``hyp_<name>`` columns), :data:`FAMILIES` the hypotheses of
each family of bounds and :data:`FAMILY_COLUMNS` the columns carrying its numbers;
:func:`hypotheses` evaluates them at one checkpoint (true/false, ``None`` where a hypothesis
cannot be evaluated, with a reason and its numbers for each that fails) and
:func:`family_status` turns them into a family's ``<family>_status``. Which hypotheses each
family rests on, and why: the module docstring of :mod:`villani.bounds.table` and
``docs/bounds.md``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from villani.bounds.formatting import NOT_APPLICABLE
from villani.bounds.theory import UNDEFINED, eta_max, positive_lam

#: Every hypothesis a bound of the table rests on, by the name of its ``hyp_<name>`` column.
HYPOTHESES = {
    "lam_positive": "λ > 0",
    "update_eq36": "the update rule is eq. (36): SGD on F + √(2η/β)·Z",
    "eta_le_eta_max": "η ≤ min(1, λ/(4σ²))",
    "f_ge_f_star": "F(θ_t) ≥ F*",
    "f_le_f0": "F(θ_t) ≤ F(θ₀): the run decreases F (reported; not a hypothesis of a bound)",
    "beta_inv_lam": "β = 1/λ: the injected noise has eq. (41)'s temperature",
    "kl_nonneg": "the KL bound is ≥ 0 before clamping",
    "loss_le_1": "L(θ̂) ≤ 1: eq. (43) is for losses in [0, 1]",
}

#: The hypotheses of each family of bounds, and the columns that carry its numbers.
FAMILIES = {
    "c_ls": ("lam_positive",),
    "theorem2": ("lam_positive", "update_eq36", "eta_le_eta_max", "f_ge_f_star"),
    "envelope": ("lam_positive", "update_eq36", "eta_le_eta_max", "f_ge_f_star", "beta_inv_lam"),
    "pac_bayes": ("lam_positive", "kl_nonneg", "loss_le_1"),
}
FAMILY_COLUMNS = {
    "theorem2": ("steps_required", "steps_required_eq33"),
    "envelope": ("envelope", "envelope_consistent", "envelope_check", "envelope_consistent_check"),
    "pac_bayes": ("pb_kl_used", "pb_kl_clamped", "pb_complexity", "pb_risk_bound", "pb_ppl_bound", "pb_vacuous",
                  "pb_ppl_ratio"),
}


def objective(measure: Mapping[str, Any]) -> float:
    """F = L + (λ/2)‖θ‖² of a measurement (its ``F`` when recorded)."""
    if measure.get("F") is not None:
        return float(measure["F"])
    return float(measure["loss"]) + 0.5 * float(measure["lam"]) * float(measure["theta_sq_norm"])


def _g(x: float) -> str:
    return f"{float(x):.4g}"


def hypotheses(measure: Mapping[str, Any], *, update_rule: str, eta: float, sigma_sq: float,
               f0: float | None, f_star: float, kl_raw: float | None, beta: float | None = None
               ) -> tuple[dict, dict]:
    """(``{name: True/False/None}``, ``{name: reason}``) of :data:`HYPOTHESES` at one checkpoint;
    a reason (with the numbers) for each hypothesis that fails or cannot be evaluated.
    ``beta``: the run's injected-noise β (``None``: no injected noise)."""
    lam = float(measure["lam"])
    F, loss = objective(measure), float(measure["loss"])
    ok: dict[str, bool | None] = {}
    why: dict[str, str] = {}
    ok["lam_positive"] = positive_lam(lam)
    if not ok["lam_positive"]:
        why["lam_positive"] = "λ = 0"
    ok["update_eq36"] = update_rule == "langevin"
    if not ok["update_eq36"]:
        why["update_eq36"] = f"update rule {update_rule}, not eq. (36)"
    e_max = eta_max(lam, sigma_sq)
    ok["eta_le_eta_max"] = None if e_max is None else float(eta) <= e_max
    if e_max is None:
        why["eta_le_eta_max"] = "η_max undefined at λ = 0"
    elif not ok["eta_le_eta_max"]:
        why["eta_le_eta_max"] = f"η = {_g(eta)} > η_max = {_g(e_max)} (σ² = {_g(sigma_sq)})"
    ok["f_ge_f_star"] = F >= f_star
    if not ok["f_ge_f_star"]:
        why["f_ge_f_star"] = f"F = {_g(F)} < F* = {_g(f_star)}"
    ok["f_le_f0"] = None if f0 is None else F <= float(f0)
    if f0 is None:
        why["f_le_f0"] = "F(θ₀) not given"
    elif not ok["f_le_f0"]:
        why["f_le_f0"] = f"F rose from F(θ₀) = {_g(f0)} to {_g(F)}"
    ok["beta_inv_lam"] = beta is not None and lam > 0 and math.isclose(float(beta) * lam, 1.0, rel_tol=1e-9)
    if beta is None:
        why["beta_inv_lam"] = "no injected noise (β undefined)"
    elif not ok["beta_inv_lam"]:
        why["beta_inv_lam"] = f"β = {_g(beta)}, 1/λ = {_g(1 / lam) if lam > 0 else 'inf'}"
    ok["kl_nonneg"] = None if kl_raw is None else kl_raw >= 0
    if kl_raw is None:
        why["kl_nonneg"] = "KL bound undefined at λ = 0"
    elif not ok["kl_nonneg"]:
        why["kl_nonneg"] = f"KL bound = {_g(kl_raw)} < 0"
    ok["loss_le_1"] = loss <= 1.0
    if not ok["loss_le_1"]:
        why["loss_le_1"] = f"L = {_g(loss)} > 1 nat"
    return ok, why


def family_status(family: str, ok: Mapping[str, bool | None], why: Mapping[str, str]) -> str:
    """``"ok"`` when every hypothesis of ``family`` holds, else ``"n/a: <reasons>"``
    (``"undefined: λ = 0"`` when λ = 0, whatever else fails)."""
    if ok["lam_positive"] is False:
        return f"{UNDEFINED}: λ = 0"
    failed = [why[h] for h in FAMILIES[family] if ok[h] is not True]
    return "ok" if not failed else f"{NOT_APPLICABLE}: " + "; ".join(failed)
