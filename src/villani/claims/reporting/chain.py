r"""The derivation chain: which rows test a premise, which rows rest on one, and the void marks.

The paper's theory runs (Sec. III–V)::

    eq. 17 (‖∇L‖ ≤ C₁, ΔL ≤ C₂ at every θ)
      → eq. 18–19, Lemma 4 (Ψ_s ≥ λ²‖θ‖²/(2s) − C₂ − λd for ‖θ‖ ≥ 4C₁/λ), eq. 26, Theorem 1;
        Corollary 1 (λ = 0: Ψ_s bounded, not Villani)
      → with eq. 22 (C_LS ≤ sup_θ s/Ψ_s: needs Ψ_s > 0 at every θ): eq. 23–24 and 21,
        C_LS ≤ (s/λ)(1 + d/(λs))
      → Theorem 2 (eq. 32–33), the envelope eq. 41 (Fig 5), Fig 10's scaling.

Theorem 3 (PAC-Bayes, eq. 42–52) needs only Z < ∞ (Lemma 3, from L ≥ 0), not eq. 17 or
eq. 22: the Fig 6 rows rest on neither. A row *rests on* a premise when the quantity it tests
is derived through it (a predicted slope, a bound, a threshold); a row about an observation
(Ψ_s grows, convergence accelerates, a correlation) stands on its own, whatever the theory
offered to explain it.

A premise **fails** when one of its rows (:data:`PREMISES`) is refuted in the same ledger (a
measured row with a p-value only if its refutation survives Holm over the measured rows);
every row resting on it (:data:`CHAIN`) is then **void**: its verdict stays — it is still
what the data say about the statement — but it cannot bear on the theory, and the report
counts void rows apart (``villani.claims.reporting.results_page``). :func:`mark` sets each row's ``rests_on``
and ``void`` columns; :func:`chain_markdown` is docs/claims.md's table of the chain.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Mapping, Sequence

from villani.claims.catalogue.verdict import REFUTED

__all__ = ["PREMISES", "CHAIN", "Step", "rests_on", "mark", "premise_status", "void_counts", "premises_text",
           "chain_markdown", "write_chain", "CHAIN_START", "CHAIN_END"]

#: Each premise and the rows that test it (measured along rays and at checkpoints, or on the
#: paper's own numbers).
PREMISES: dict[str, tuple[str, ...]] = {
    "eq. 17": ("eq17_grad_bounded", "eq17_grad_c1", "eq17_laplacian_c2", "eq17_checkpoints", "appA_c2_vs_table3"),
    "eq. 22": ("psi_positive_checkpoints",),
}


@dataclass(frozen=True)
class Step:
    """A result of the derivation, the premises it needs and the rows (ids or family patterns)
    whose tested quantity it supplies."""

    result: str
    needs: tuple[str, ...]
    rows: tuple[str, ...]


#: The chain, in the paper's order.
CHAIN: tuple[Step, ...] = (
    Step("Corollary 1: at λ = 0, Ψ_s stays bounded (‖∇L‖ ≤ C₁, ΔL bounded)", ("eq. 17",),
         ("fig2_lam0_saturates",)),
    Step("Lemma 4, eq. 18–19 and 26: Ψ_s ≥ λ²‖θ‖²/(2s) − C₂ − λd, its slope and threshold", ("eq. 17",),
         ("fig2_slope_lam1e-2", "fig2_onset_1e5", "fig2_matches_thresholds", "sec4_psi_rises_with_lam",
          "sec4_psi_growth_term_at_paper_scale")),
    Step("eq. 21–24: C_LS ≤ (s/λ)(1 + d/(λs)), and what is said of it", ("eq. 17", "eq. 22"),
         ("sec3a_gaussian_scaling", "sec2d_dimension_free", "fig10_favourable_scaling")),
    Step("Theorem 2 (eq. 32–33) and the envelope eq. 41", ("eq. 17", "eq. 22"),
         ("theorem2_paper_runs", "fig5_envelope_holds", "fig5_envelope_tracks", "fig5_wt103_tighter",
          "theorem2_steps_vs_trained")),
)


def rests_on(claim_id: str) -> tuple[str, ...]:
    """The premises a row rests on (through every step whose rows match its id), in order."""
    out: list[str] = []
    for step in CHAIN:
        if any(fnmatch.fnmatchcase(claim_id, pat) for pat in step.rows):
            out += [p for p in step.needs if p not in out]
    return tuple(out)


def _refutes(r: Mapping) -> bool:
    """Refuted, and — a measured row with a p-value — still refuted after Holm over its table
    (``verdict_holm`` is empty for a row without one: an exact number, an arithmetic row)."""
    return r["verdict"] == REFUTED and r.get("verdict_holm") in (None, "", REFUTED)


def premise_status(rows: Sequence[Mapping]) -> dict[str, dict]:
    """Per premise: its rows' verdicts and the ids of those that refute it (``failed`` when any does)."""
    verdicts = {r["id"]: r["verdict"] for r in rows}
    refuting = {r["id"] for r in rows if _refutes(r)}
    out = {}
    for name, ids in PREMISES.items():
        refuted = [i for i in ids if i in refuting]
        out[name] = {"rows": {i: verdicts.get(i, "absent") for i in ids}, "refuted_by": refuted,
                     "failed": bool(refuted)}
    return out


def mark(rows: list[dict]) -> dict[str, dict]:
    """Set ``rests_on`` (the premises) and ``void`` (each failed one with the rows that refute it,
    "" when none) on every row; return :func:`premise_status`."""
    status = premise_status(rows)
    for r in rows:
        needs = rests_on(r["id"])
        r["rests_on"] = "; ".join(needs)
        r["void"] = "; ".join(f"{p} ({', '.join(status[p]['refuted_by'])})" for p in needs if status[p]["failed"])
    return status


def void_counts(rows: Sequence[Mapping], classes: Sequence[str]) -> dict[str, int]:
    """Void rows by class."""
    return {k: sum(bool(r.get("void")) and r["class"] == k for r in rows) for k in classes}


def premises_text(doc: Mapping) -> list[str]:
    """The report's premise lines of a ledger JSON: each premise with its rows' verdicts and
    estimates, then the void rows by class."""
    status = doc["premises"]
    if not status:
        return []
    rows = {r["id"]: r for r in doc["claims"]}

    def cell(i: str) -> str:
        r = rows.get(i)
        est = "" if r is None or r["estimate"] is None else f" {r['estimate']:.3g}"
        return f"`{i}` {r['verdict'] if r else 'absent'}{est}"

    out = ["### The theory's premises, tested before their consequences", ""]
    for name, st in status.items():
        head = "**fails**" if st["failed"] else "not refuted"
        out.append(f"- {name} {head}: " + ", ".join(cell(i) for i in st["rows"]) + ".")
    void = [r for r in doc["claims"] if r.get("void")]
    by = ", ".join(f"{k} {n}" for k, n in doc["counts_void"].items() if n) or "none"
    out += ["", f"Void — resting on a failed premise (docs/claims.md, the chain): {len(void)} of {len(doc['claims'])} "
                f"rows ({by}); their verdicts stand and are counted above, but bear on no result of the theory: "
                + (", ".join(f"`{r['id']}`" for r in void) or "none") + ".", ""]
    return out


CHAIN_START, CHAIN_END = "<!-- claims-chain:start -->", "<!-- claims-chain:end -->"


def chain_markdown() -> str:
    """docs/claims.md's table: each premise and its rows, then each step, what it needs and the
    rows resting on it."""
    lines = ["| premise | tested by |", "|---|---|"]
    lines += [f"| {p} | {', '.join(f'`{i}`' for i in ids)} |" for p, ids in PREMISES.items()]
    lines += ["", "| result | needs | rows resting on it |", "|---|---|---|"]
    lines += [f"| {s.result} | {', '.join(s.needs)} | {', '.join(f'`{i}`' for i in s.rows)} |" for s in CHAIN]
    return "\n".join(lines) + "\n"


def write_chain(path) -> None:
    """Put :func:`chain_markdown` between the chain markers of ``path`` (docs/claims.md)."""
    from villani.io.atomic import replace_marked

    replace_marked(path, CHAIN_START, CHAIN_END, chain_markdown())
