r"""The independent errors the paper's arithmetic refutations rest on (the ledger's ``root`` column).

Many arithmetic rows are refuted by the same mistake of the paper: eq. (52)'s K₀ is
d-sized, and that one term refutes four claims of Fig 6; the trace magnitudes of Table III
and Fig 8 (≈ 5,000·λd) refute four statements that the trace "converges to λd". Counting the
rows would count the mistake four times. Each refuted arithmetic row names its **root** —
the one number, term or premise of the paper whose correction would remove that row's
refutation — and rows share a root exactly when one correction removes all of their
refutations. Two roots are independent when correcting one leaves the other's rows refuted
(K₀ set right would give eq. (52) a bound that falls with λ, but its (d/2)·log 2 would still
be linear in d: ``eq52_K0_d_sized`` and ``eq52_linear_in_d`` are two roots).

:data:`ROOTS` is the list, each with the rows it refutes; :func:`root_of` gives a ledger row
its root (only a refuted arithmetic row has one), :func:`summary` the ledger's count —
"33 rows, 20 independent errors" on the shipped parameters — which ``villani claims-report`` prints with the list.
``tests/claims/test_arithmetic.py`` checks that every arithmetic refutation names a root and
that every root's rows are refuted arithmetic rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from villani.claims.catalogue.registry import ARITHMETIC
from villani.claims.catalogue.verdict import REFUTED

__all__ = ["Root", "ROOTS", "ROOT_OF", "root_of", "summary"]


@dataclass(frozen=True)
class Root:
    """One independent error of the paper: a short ``name``, the ``error`` in a sentence with its
    numbers, and the ids of the arithmetic rows it refutes."""

    name: str
    error: str
    rows: tuple[str, ...]


ROOTS: tuple[Root, ...] = (
    Root("eq52_K0_d_sized", "eq. (52)'s K₀ = (d/2)·log(λ²/2π) is d-sized (−5.5·d at λ = 10⁻²): with (d/2)·log 2 it "
         "makes the square-root argument negative at every λ of the paper — no bound, no ratio, no R² — and makes "
         "it grow by d·log(λ₂/λ₁) with λ, so where a bound exists it loosens with λ",
         ("fig6_ratio_weak", "fig6_ratio_strong", "fig6_r2", "fig6_tightens_with_lam")),
    Root("eq52_linear_in_d", "eq. (52)'s K₀ and (d/2)·log 2 are linear in d: the bound's dependence on d is linear, "
         "not logarithmic", ("eq52_log_d",)),
    Root("eq52_power_of_lam", "eq. (52)'s only power of λ is L̂/λ under the square root: the complexity decays as "
         "λ^(−1/2), not λ⁻²", ("fig6_quadratic_in_lam",)),
    Root("upper_bound_below_diagonal", "a bound y on perplexity x below the diagonal y = x is violated, not "
         "conservative", ("fig6_below_diagonal_conservative",)),
    Root("trace_is_not_lam_d", "the paper's trace magnitudes (Table III's 1.7–58·10⁸, Fig 8's 58·10⁸) are ≈ 5,000·λd "
         "(λd = 1.25·10⁵ at λ = 10⁻³, 1.25·10⁶ at 10⁻²), while it says the trace converges to λd",
         ("table3_trace_over_lam_d", "table3_wt103_trace_over_lam_d", "fig8_trace_to_lam_d", "fig8_lam_d_value")),
    Root("c_ls_d_over_lam_sq", "C_LS(F) ≤ s/λ + d/λ² is ≈ d/λ² = 1.25·10¹² at λ = 10⁻², d = 1.25·10⁸: every time "
         "scale it sets — Theorem 2's C_LS(F)/(2η) = 6.25·10¹⁵ steps, eq. (41)'s C_LS(βF)/(2η) = 6.25·10¹³ — is "
         "≥ 10⁷× the paper's longest run (1,005,859 steps), and 8,000× more at d = 10¹²; and it grows as d and λ⁻², "
         "where a Gaussian's C_LS is 1/λ whatever d (no 'classical Gaussian' agreement, not dimension-free)",
         ("fig5_envelope_tracks", "theorem2_paper_runs", "fig10_favourable_scaling", "sec3a_gaussian_scaling",
          "sec2d_dimension_free")),
    Root("ptb_size", "Fig 5's N ≈ 42,000 PTB tokens against Table II's 887k (42,068 is PTB's count of training "
         "sentences)", ("fig5_ptb_tokens",)),
    Root("sqrt_2d_over_m", "√(2d/M) = 1,976 at d = 1.25·10⁸, M = 64: no CV of 4.9 %", ("fig9_cv_sqrt_2d_over_M",)),
    Root("m64_relative_error", "the paper's relative error is the per-sample CV (Table III's CI column), which M does "
         "not reduce: Table III has it ≥ 5 % on 5 of its 6 rows, 10.9–12.4 % at λ = 0, so M = 64 does not give "
         "< 5 %", ("fig9_m64_below_5pct",)),
    Root("appb_bound_grows", "App. B's error bound √(2d/M)·λ‖θ‖ grows with ‖θ‖: below a fixed level only up to some "
         "‖θ‖, never 'once ‖θ‖ ≳ 10⁴'", ("appB_bound_threshold",)),
    Root("table1_eta_rule", "η ≲ λ/(4σ²) with Table I's own noise (σ² = Tr Σ = 0.05²·d) allows η ≤ 8·10⁻⁹ at "
         "λ = 10⁻² and η ≤ 0 at λ = 0; Table I's η are 5·10⁻⁵ to 2·10⁻⁴", ("table1_eta_rule",)),
    Root("table1_one_lam", "λ‖θ₀‖² ≈ 10·L(θ₀) fixes one λ (θ₀ and L(θ₀) are the initialisation's): it cannot hold "
         "at four λ spanning 100×, one of them 0", ("table1_guidelines",)),
    Root("table1_temperature", "β⁻¹ = ησ²/(2d) = η·0.05²/2 ≤ 2.5·10⁻⁷ is ≥ 400× below every λ > 0 it should match",
         ("table1_temperature_matches_lam",)),
    Root("lam_d_dominates", "at the paper's d the constant −λd of eq. (19) outweighs the growth term λ²‖θ‖²/s unless "
         "‖θ‖² > sd/λ (1.25·10¹² at λ = 10⁻⁴, 1.25·10¹⁰ at 10⁻²)",
         ("fig2_onset_1e5", "sec4_psi_growth_term_at_paper_scale")),
    Root("lemma4_threshold", "Lemma 4's threshold ‖θ‖ ≥ 2C₁/λ with App. A's C₁ = 7.6 is ‖θ‖² ≥ 2.3·10¹⁰ at "
         "λ = 10⁻⁴, 2.3·10⁵× the 10⁵ the paper says matches it", ("fig2_matches_thresholds",)),
    Root("penalty_curvature_is_lam", "the penalty's Hessian is λI at every θ: it adds λ to every eigenvalue — so it "
         "cannot make λ_max grow as λ‖θ‖, it lowers μ_max/μ_median whatever ∇²L, and it shifts every Rademacher "
         "sample vᵀ∇²F v by exactly λd, leaving the samples' variance without λ",
         ("fig4_penalty_curvature", "fig4_ratio_penalty_part", "fig8_var_lam_part")),
    Root("eq17_constants", "App. A's C₁ = 7.6 gives C₂ ≈ 5.7·10⁶ by eq. (54)–(56), while Table III's λ = 0 trace "
         "of ∇²L is 1.74·10⁸, ≈ 30× the bound the paper's own constants set on it", ("appA_c2_vs_table3",)),
    Root("lemma4_square", "completing the square in Lemma 4, ½‖θ‖² − (2C₁/λ)‖θ‖ ≥ 0 needs ‖θ‖ ≥ 4C₁/λ, twice the "
         "printed 2C₁/λ", ("lemma4_square",)),
    Root("eq52_drops_eq44_term", "eq. (52) writes eq. (44)'s (d/2)·log(1 + β/λ) at β = 1/λ as (d/2)·log 2; it is "
         "(d/2)·log(1 + λ⁻²), −4.3 nats per parameter apart at λ = 10⁻²", ("eq52_from_eq44",)),
    Root("one_model_size", "a trend in model size needs two sizes; Sec. VI-I measures GPT-Neo-125M alone",
         ("sec6i_one_model_size",)),
)

#: The root of each row that has one.
ROOT_OF: dict[str, str] = {cid: r.name for r in ROOTS for cid in r.rows}


def root_of(cid: str, row_class: str, verdict: str) -> str:
    """The root error of a refuted arithmetic row (``""`` for any other row, or a refuted
    arithmetic row :data:`ROOTS` does not name — which the tests refuse)."""
    return ROOT_OF.get(cid, "") if row_class == ARITHMETIC and verdict == REFUTED else ""


def summary(rows: Sequence[Mapping]) -> dict:
    """The ledger's count of its arithmetic refutations against their root errors:
    ``{"rows", "errors", "unattributed", "roots": [{"root", "error", "rows"}, …]}``, roots in
    :data:`ROOTS` order, each with the rows of this ledger that it refutes."""
    refuted = [r for r in rows if r["class"] == ARITHMETIC and r["verdict"] == REFUTED]
    out = []
    for root in ROOTS:
        ids = [r["id"] for r in refuted if r.get("root") == root.name]
        if ids:
            out.append({"root": root.name, "error": root.error, "rows": ids})
    return {"rows": len(refuted), "errors": len(out), "unattributed": [r["id"] for r in refuted if not r.get("root")],
            "roots": out}
