r"""``villani claims-report``: the README's "What the data say about the paper", from ledgers.

Every number is read from ledger JSONs (``results/claims/{dataset}.json``, written by
``villani claims``), so a report can put ledgers of different configurations side by side:

1. **the counts** of the paper's claims by class × verdict, and the findings apart;
2. **the treatment** the main ledger's runs applied — the change of ‖θ‖² and of validation
   perplexity between its smallest and largest λ against the between-seed SD of that
   perplexity — and what it means for λ-claims;
3. **wrong at any scale** (arithmetic, refuted) and **consistent** (arithmetic, supported);
4. **measured here**: the decisive rows with the scale they are about, the Holm statement
   over the measured rows, and the power plan — which claims this design can never decide
   and which a stated number of seeds would;
5. **needs scale**: what would decide each, and its price in GPU-hours;
6. **our findings**, never counted as the paper's;
7. with ``--sensitivity``: each further ledger beside the main one — its treatment, and every
   claim whose verdict differs — a sensitivity analysis of what weight decay does when it acts.

With ``--write FILE`` the text replaces what lies between :data:`START` and :data:`END` in FILE
(the README), and "Where the paper is wrong" (:mod:`villani.claims.wrong`) what lies between
its markers, if FILE has them; without it, both are printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from villani.claims.registry import ARITHMETIC, CLASSES, MEASURED, NEEDS_SCALE
from villani.claims.text import fmt_row, num, scale_text
from villani.claims.verdict import INCONCLUSIVE, REFUTED, SUPPORTED
from villani.claims.wrong import WRONG_END, WRONG_START, wrong
from villani.io import atomic
from villani.io.records import check, check_sealed
from villani.plan.writers import command

__all__ = ["START", "END", "load", "report", "write_report", "treatment_text"]

START, END = "<!-- claims-report:start -->", "<!-- claims-report:end -->"


def _rewrite(path) -> str:
    """How to write the ledger ``path`` again: its command where it lies in a results tree."""
    cmd = command(path)
    return f"rerun `{cmd}`" if cmd else "rerun `villani claims` with the parameters it was written under"


def load(path: str | Path) -> dict:
    """A ledger JSON (one-line error naming the file when it is not one, or when it was
    changed after `villani claims` wrote it: its ``record_sha256``)."""
    doc = check("claims", atomic.read_json(path, "claims ledger"), path)
    for key in ("claims", "counts_by_class", "findings", "scale", "multiplicity"):
        if key not in doc:
            raise ValueError(f"{path}: {key}: missing (a ledger of `villani claims` at this version has it; "
                             f"{_rewrite(path)})")
    check_sealed(doc, path, "claims ledger", _rewrite(path))
    doc["_path"] = str(path)
    return doc


def treatment_text(doc: Mapping) -> str:
    """The treatment sentence: what λ did to ‖θ‖² and to perplexity against the seed spread."""
    t, s = doc.get("treatment") or {}, doc["scale"]
    if not t:
        return f"{doc['dataset']}: no two learned λ to compare."
    sd, dp = t.get("seed_sd_val_ppl"), t["delta_val_ppl"]
    ratio = (f" — the seed spread is {sd / abs(dp):.2g}× the λ effect" if sd and dp else "")
    verdict = ("λ acts visibly at this design" if t.get("lambda_visible") else
               "λ-claims cannot be decided at this design: what λ does is smaller than what the seed does")
    return (f"Treatment ({doc['dataset']}, λ·η·T ≤ {s['largest_budget']:.3g}): from λ = {t['lam_low']:g} to "
            f"{t['lam_high']:g} the AdamW runs' final ‖θ‖² changes by {100 * t['delta_theta_sq_rel']:+.1f}% and their "
            f"validation perplexity by {dp:+.3g}, against a between-seed SD of {num(sd)}{ratio}; {verdict}.")


def _counts_table(doc: Mapping) -> list[str]:
    verdicts = (SUPPORTED, REFUTED, INCONCLUSIVE, "untestable")
    out = ["| class | " + " | ".join(verdicts) + " | rows |", "|---" * (len(verdicts) + 2) + "|"]
    for k in CLASSES:
        c = doc["counts_by_class"][k]
        out.append(f"| {k} | " + " | ".join(str(c[v]) for v in verdicts) + f" | {sum(c.values())} |")
    return out


def _power_lines(rows: Sequence[Mapping]) -> list[str]:
    measured = [r for r in rows if r["class"] == MEASURED]
    never = [r["id"] for r in measured if str(r.get("seeds_to_decide")) == "never"]
    huge = [r["id"] for r in measured if str(r.get("seeds_to_decide", "")).startswith(">")]
    some = sorted(((int(r["seeds_to_decide"]), r["id"]) for r in measured
                   if str(r.get("seeds_to_decide", "")).isdigit()), key=lambda t: t[0])
    why: dict[str, list[str]] = {}
    for r in measured:
        if str(r.get("seeds_to_decide", "")).startswith("n/a"):
            why.setdefault(r["seeds_to_decide"][5:], []).append(f"`{r['id']}`")
    none_ = [f"{', '.join(ids)} ({reason})" for reason, ids in why.items()]
    return [f"Power plan (seeds at which the observed effect's interval would clear its region's nearest boundary; "
            f"an experiment there decides about half the time, the `seeds_80pct` column 4 in 5):",
            f"- never decidable at this design (the effect sits on a boundary): {', '.join(never) or 'none'};",
            f"- beyond 10⁶ seeds: {', '.join(huge) or 'none'};",
            "- decidable with: " + (", ".join(f"`{i}` {n}" for n, i in some) or "none") + ";",
            f"- nothing to plan from: {'; '.join(none_) or 'none'}."]


def _main_section(doc: Mapping) -> list[str]:
    rows = doc["claims"]
    by = {k: [r for r in rows if r["class"] == k] for k in CLASSES}
    mult = doc["multiplicity"]
    out = [f"Generated by `villani claims-report` from `{doc['_path']}`: {len(rows)} claims of the paper, "
           f"{len(doc['findings']['rows'])} findings of ours (counted apart).", ""]
    out += _counts_table(doc) + ["", treatment_text(doc), "", "### Wrong at any scale (the arithmetic)", ""]
    out += [fmt_row(r) for r in by[ARITHMETIC] if r["verdict"] == REFUTED] or ["- none"]
    out += ["", "Consistent by the paper's own numbers:", ""]
    out += [fmt_row(r) for r in by[ARITHMETIC] if r["verdict"] == SUPPORTED] or ["- none"]
    out += ["", "### Measured here", "", scale_text(doc), ""]
    decided = [r for r in by[MEASURED] if r["verdict"] in (SUPPORTED, REFUTED)]
    out += [fmt_row(r) + f" **{r['verdict']}** (Holm: {r.get('verdict_holm') or 'no p-value'})." for r in decided]
    out += [] if decided else ["- no measured row is decided"]
    out += ["", f"Family-wise: Holm over the {mult['rows']} measured rows with a p-value keeps {mult['survive']} of "
                f"{mult['decided']} decisions at α = {mult['alpha']:.2g}"
                + (f" (lost: {', '.join(mult['lost'])})." if mult["lost"] else "."),
            f"Inconclusive here: {', '.join(r['id'] for r in by[MEASURED] if r['verdict'] == INCONCLUSIVE) or 'none'}.",
            ""]
    out += _power_lines(rows) + ["", "### Needs scale", ""]
    out += [f"- `{r['id']}` ({r['source']}): {r['paper_statement']} — decided by {r['decided_by'] or 'n/a'}."
            for r in by[NEEDS_SCALE]] or ["- none"]
    out += ["", "### Our findings (not the paper's claims)", ""]
    out += [fmt_row(r) + f" **{r['verdict']}**." for r in doc["findings"]["rows"]] or ["- none"]
    return out


def _sensitivity(main: Mapping, other: Mapping) -> list[str]:
    a = {r["id"]: r for r in main["claims"]}
    b = {r["id"]: r for r in other["claims"]}
    flips = [i for i in a if i in b and a[i]["verdict"] != b[i]["verdict"]]
    out = [f"### Sensitivity: `{other['_path']}` beside `{main['_path']}`", "", treatment_text(other), "",
           scale_text(other), "", "| claim | class | " + f"{main['dataset']} | {other['dataset']} |", "|---|---|---|---|"]
    out += [f"| `{i}` | {b[i]['class']} | {a[i]['verdict']} {num(a[i]['estimate'])} | {b[i]['verdict']} "
            f"{num(b[i]['estimate'])} [{num(b[i]['ci_low'])}, {num(b[i]['ci_high'])}] |" for i in flips]
    out += ["", f"{len(flips)} of {len(a)} verdicts differ; the other {len(a) - len(flips)} agree."]
    return out


def report(main: Mapping, sensitivity: Sequence[Mapping] = ()) -> str:
    """The section (Markdown) of a ledger, with a sensitivity part per further ledger."""
    out = _main_section(main)
    for other in sensitivity:
        out += [""] + _sensitivity(main, other)
    return "\n".join(out) + "\n"


def _between(text: str, start: str, end: str, body: str, target) -> str:
    if start not in text or end not in text or text.index(start) > text.index(end):
        raise ValueError(f"{target}: no '{start}' … '{end}' markers to put the claims report between")
    head, rest = text.split(start, 1)
    return head + start + "\n" + body + end + rest.split(end, 1)[1]


def write_report(target: str | Path, main: Mapping, sensitivity: Sequence[Mapping] = ()) -> str:
    """Replace the text between :data:`START` and :data:`END` in ``target`` (and between
    "Where the paper is wrong"'s markers when it has them); a one-line error naming the file
    when the report's markers are missing."""
    target = Path(target)
    text = _between(target.read_text(), START, END, report(main, sensitivity), target)
    if WRONG_START in text:
        text = _between(text, WRONG_START, WRONG_END, wrong(main, sensitivity), target)
    atomic.write_text(target, text)
    return f"{target}: claims report from {', '.join(d['_path'] for d in (main, *sensitivity))}"
