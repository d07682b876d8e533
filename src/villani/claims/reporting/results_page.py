r"""``villani claims-report``: what the ledgers say about the paper (``docs/results.md``), from ledgers.

Every number is read from ledger JSONs (``results/claims/{dataset}.json``, written by
``villani claims``), so a report can put ledgers of different configurations side by side:

1. **the counts** of the paper's claims by class × verdict, and the findings apart; the theory's
   **premises** (eq. 17, eq. 22) with their rows' verdicts, and the rows void because they rest
   on a failed one (:mod:`villani.claims.reporting.chain`), counted apart;
2. **the treatment** the main ledger's runs applied — the change of ‖θ‖² and of validation
   perplexity between its smallest and largest λ against the between-seed SD of that
   perplexity — and what it means for λ-claims;
3. **wrong at any scale** (arithmetic, refuted), counted against the independent errors they
   rest on and listed under them (:mod:`villani.claims.reporting.roots`), **consistent** (arithmetic,
   supported) and **not a result of the paper** (what it announces and never reports);
4. **measured here**: the decisive rows with the scale they are about, the Holm statement
   over the measured rows, and the power plan — which claims this design can never decide
   and which a stated number of seeds would;
5. **needs scale**: what would decide each, and its price in GPU-hours;
6. **our findings**, never counted as the paper's;
7. with ``--sensitivity FILE``: another design's parameters (``configs/strong.yaml``) — the chain
   of designs from the main one to it, one factor per link, every changed verdict attributed to
   its link's factor (:mod:`villani.claims.reporting.sensitivity`), then its treatment and scale.

With ``--write FILE …`` each file gets every section whose markers it has: this text between
:data:`START` and :data:`END` (``docs/results.md``), "Where the paper is wrong"
(:mod:`villani.claims.reporting.errors_page`) between its markers (``docs/paper-errors.md``), and the short table
of :func:`verdict_table` between :data:`VERDICTS_START` and :data:`VERDICTS_END` (the README);
without it, the first two are printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from villani.claims.reporting import power
from villani.claims.reporting.chain import premises_text
from villani.claims.catalogue.registry import ARITHMETIC, CLASSES, MEASURED, NEEDS_SCALE
from villani.claims.reporting.sensitivity import chain_section
from villani.claims.reporting.text import by_root, fmt_row, num, roots_count, scale_text
from villani.claims.catalogue.verdict import INCONCLUSIVE, NOT_A_RESULT, REFUTED, SUPPORTED, VERDICTS
from villani.claims.reporting.errors_page import WRONG_END, WRONG_START, wrong
from villani.io import atomic
from villani.io.records import check, check_sealed
from villani.plan.writers import command

__all__ = ["START", "END", "VERDICTS_START", "VERDICTS_END", "load", "report", "verdict_table", "write_report",
           "treatment_text"]

START, END = "<!-- claims-report:start -->", "<!-- claims-report:end -->"
VERDICTS_START, VERDICTS_END = "<!-- claims-verdicts:start -->", "<!-- claims-verdicts:end -->"


def _rewrite(path) -> str:
    """How to write the ledger ``path`` again: its command where it lies in a results tree."""
    cmd = command(path)
    return f"rerun `{cmd}`" if cmd else "rerun `villani claims` with the parameters it was written under"


def load(path: str | Path) -> dict:
    """A ledger JSON (one-line error naming the file when it is not one, or when it was
    changed after `villani claims` wrote it: its ``record_sha256``)."""
    doc = check("claims", atomic.read_json(path, "claims ledger"), path)  # its schema requires what is read here
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
    ci = t.get("paired_ci_val_ppl")
    paired = ("" if t.get("paired_sd_val_ppl") is None else
              f" (the same change within each seed — the contrast the within-seed statistics use — has SD "
              f"{num(t['paired_sd_val_ppl'])}" + (f", 95% CI [{num(ci[0])}, {num(ci[1])}]" if ci else "") + ")")
    return (f"Treatment ({doc['dataset']}, λ·η·T ≤ {s['largest_budget']:.3g}): from λ = {t['lam_low']:g} to "
            f"{t['lam_high']:g} the AdamW runs' final ‖θ‖² changes by {100 * t['delta_theta_sq_rel']:+.1f}% and their "
            f"validation perplexity by {dp:+.3g}, against a between-seed SD of {num(sd)}{ratio}{paired}; {verdict}.")


def _counts_table(doc: Mapping) -> list[str]:
    out = ["| class | " + " | ".join(VERDICTS) + " | rows |", "|---" * (len(VERDICTS) + 2) + "|"]
    for k in CLASSES:
        c = doc["counts_by_class"][k]
        out.append(f"| {k} | " + " | ".join(str(c[v]) for v in VERDICTS) + f" | {sum(c.values())} |")
    return out + ["", f"Arithmetic refutations: {roots_count(doc)} (one error can refute several claims; "
                      "`root` column, docs/claims.md)."]


def _power_lines(rows: Sequence[Mapping]) -> list[str]:
    measured = [r for r in rows if r["class"] == MEASURED]
    huge = [r["id"] for r in measured if str(r.get("seeds_to_decide", "")).startswith(">")]
    some = sorted(((int(r["seeds_to_decide"]), r["id"], (r.get("power_note") or "seeds").split()[0]) for r in measured
                   if str(r.get("seeds_to_decide", "")).isdigit()), key=lambda t: t[0])
    why: dict[str, list[str]] = {}
    for r in measured:
        if str(r.get("seeds_to_decide", "")).startswith("n/a"):
            why.setdefault(r["seeds_to_decide"][5:], []).append(f"`{r['id']}`")
    none_ = [f"{', '.join(ids)} ({reason})" for reason, ids in why.items()]
    return [f"Power plan, from each claim's region and not from its estimate (`villani.claims.reporting.power`): the units at "
            f"which a truth one minimal effect of interest from the region's boundary — the region's own tolerance, "
            f"{100 * power.THRESHOLD_TOLERANCE:g} % of a threshold, a correlation of {power.MIN_CORRELATION:g} for a "
            f"sign — is decided with probability {power.POWER:g}, at the between-unit SD of the statistic as it is "
            "built (paired within seed where it pairs):",
            "- decidable with: " + (", ".join(f"`{i}` {n} {u}" for n, i, u in some) or "none") + ";",
            f"- beyond 10⁶: {', '.join(huge) or 'none'};",
            f"- nothing to plan from: {'; '.join(none_) or 'none'}."]


def _main_section(doc: Mapping) -> list[str]:
    rows = doc["claims"]
    by = {k: [r for r in rows if r["class"] == k] for k in CLASSES}
    mult = doc["multiplicity"]
    out = [f"Generated by `villani claims-report` from `{doc['_path']}`: {len(rows)} claims of the paper, "
           f"{len(doc['findings']['rows'])} findings of ours (counted apart).", ""]
    out += _counts_table(doc) + ["", treatment_text(doc), ""] + premises_text(doc)
    out += ["### Wrong at any scale (the arithmetic)", ""]
    out += [f"{roots_count(doc)}, each row under the error it rests on:", ""] + (by_root(doc) or ["- none"])
    out += ["", "Consistent by the paper's own numbers:", ""]
    out += [fmt_row(r) for r in by[ARITHMETIC] if r["verdict"] == SUPPORTED] or ["- none"]
    out += ["", "Not a result of the paper (announced, never reported — nothing to test):", ""]
    out += [fmt_row(r) for r in rows if r["verdict"] == NOT_A_RESULT] or ["- none"]
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


def _check_ends(chain: Mapping, main: Mapping, other: Mapping) -> None:
    """The chain's first and last designs are the two ledgers' own: the same verdicts (one-line
    error naming the ledger that is not current)."""
    for doc, d in ((main, chain["designs"][0]), (other, chain["designs"][-1])):
        diff = [r["id"] for r in doc["claims"] if r["id"] in d["rows"] and d["rows"][r["id"]]["verdict"] != r["verdict"]]
        if diff:
            raise ValueError(f"{doc['_path']}: its verdicts differ from those of its design recomputed now "
                             f"({', '.join(diff[:3])}); rerun `villani claims` for it")


def _sensitivity(main: Mapping, other: Mapping, chain: Mapping) -> list[str]:
    _check_ends(chain, main, other)
    return chain_section(chain) + ["", treatment_text(other), "", scale_text(other)]


def report(main: Mapping, sensitivity: Sequence[Mapping] = (), chains: Sequence[Mapping] = ()) -> str:
    """The section (Markdown) of a ledger, with a sensitivity part per further ledger and its chain
    of designs (:func:`villani.claims.reporting.design.chain_doc`, one per ledger)."""
    out = _main_section(main)
    for other, chain in zip(sensitivity, chains, strict=True):
        out += [""] + _sensitivity(main, other, chain)
    return "\n".join(out) + "\n"


def _between(text: str, start: str, end: str, body: str, target) -> str:
    if start not in text or end not in text or text.index(start) > text.index(end):
        raise ValueError(f"{target}: no '{start}' … '{end}' markers to put the claims report between")
    head, rest = text.split(start, 1)
    return head + start + "\n" + body + end + rest.split(end, 1)[1]


def verdict_table(main: Mapping, sensitivity: Sequence[Mapping] = ()) -> str:
    """The README's short part (Markdown): per ledger, its claims counted by class × verdict — the
    table that opens :func:`report` — and where the full ledgers and the refutations are."""
    paths = ", ".join(f"`{d['_path']}`" for d in (main, *sensitivity))
    out = [f"Generated by `villani claims-report` from {paths}.",
           "Every row of each: [Results](docs/results.md); the refutations: [The paper's errors](docs/paper-errors.md)."]
    for doc in (main, *sensitivity):
        out += ["", f"`{doc['_path']}` — {len(doc['claims'])} claims of the paper "
                    f"({len(doc['findings']['rows'])} findings of ours counted apart):", ""] + _counts_table(doc)
    return "\n".join(out) + "\n"


def _rendered(target: Path, main: Mapping, sensitivity: Sequence[Mapping], chains: Sequence[Mapping]) -> str:
    text = target.read_text()
    sections = ((START, END, lambda: report(main, sensitivity, chains)),
                (WRONG_START, WRONG_END, lambda: wrong(main, sensitivity)),
                (VERDICTS_START, VERDICTS_END, lambda: verdict_table(main, sensitivity)))
    if not any(start in text for start, _, _ in sections):
        raise ValueError(f"{target}: no '{START}', '{WRONG_START}' or '{VERDICTS_START}' markers to put the claims "
                         "report between")
    for start, end, body in sections:
        if start in text:
            text = _between(text, start, end, body(), target)
    return text


def write_report(targets: str | Path | Sequence[str | Path], main: Mapping, sensitivity: Sequence[Mapping] = (),
                 chains: Sequence[Mapping] = ()) -> str:
    """Replace, in each file of ``targets``, the text between each pair of markers it has —
    :data:`START`/:data:`END` (the full report), "Where the paper is wrong"'s and
    :data:`VERDICTS_START`/:data:`VERDICTS_END` (the verdict table); ``chains``: the one-factor chains
    of :mod:`villani.claims.reporting.sensitivity`. Every file is rendered before any is written: a one-line error naming a file that has none of them leaves all unchanged."""
    paths = [Path(targets)] if isinstance(targets, (str, Path)) else [Path(t) for t in targets]
    texts = [_rendered(p, main, sensitivity, chains) for p in paths]
    for p, text in zip(paths, texts):
        atomic.write_text(p, text)
    return "\n".join(f"{p}: claims report from {', '.join(d['_path'] for d in (main, *sensitivity))}" for p in paths)
