"""How a ledger row and the run a ledger is about read in prose (the generated pages of
:mod:`villani.claims.reporting.results_page` and :mod:`villani.claims.reporting.errors_page`)."""

from __future__ import annotations

from typing import Mapping

__all__ = ["num", "fmt_row", "scale_text", "roots_count", "by_root"]


def num(x) -> str:
    """Three significant digits, or n/a."""
    return "n/a" if x is None else f"{x:.3g}"


def fmt_row(r: Mapping, *, note: bool = True) -> str:
    """One row as a sentence: id, source, statement, statistic, estimate [interval], region, note."""
    ci = "" if r["ci_low"] is None else f" [{num(r['ci_low'])}, {num(r['ci_high'])}]"
    est = "no statistic" if r["estimate"] is None else f"{num(r['estimate'])}{ci}"
    text = f"- `{r['id']}` ({r['source']}): {r['paper_statement']} — {r['statistic']}: {est}, claimed {r['claimed_region']}."
    return text + (f" {r['note']}" if note and r["note"] else "")


def scale_text(doc: Mapping) -> str:
    """The run a ledger is about, in one sentence."""
    s = doc["scale"]
    d = "n/a" if s["d"] is None else f"{s['d']:,}"
    tok = "n/a" if s["tokens_per_run"] is None else f"{s['tokens_per_run']:,}"
    return (f"{doc['dataset']}: d = {d} parameters, {tok} training tokens per run, T = {s['steps']} steps, seeds "
            f"{', '.join(map(str, s['seeds']))}, vocabulary {s['vocab']}, largest decay budget λ·η·T = "
            f"{s['largest_budget']:.3g}. λ matched by λ·η·T: {s['lambda_match']}. Runs that decide nothing (final "
            f"validation perplexity not below the corpus's unigram model's, {s['unigram_val_ppl']:.4g}): "
            f"{', '.join(s['runs_deciding_nothing']) or 'none'}.")


def roots_count(doc: Mapping) -> str:
    """"25 rows, 16 independent errors": the ledger's arithmetic refutations against their roots."""
    r = doc["roots"]
    loose = f"; {len(r['unattributed'])} without a named root: {', '.join(r['unattributed'])}" if r["unattributed"] else ""
    return f"{r['rows']} rows, {r['errors']} independent errors{loose}"


def by_root(doc: Mapping) -> list[str]:
    """The refuted arithmetic rows under the root error each rests on (:mod:`villani.claims.reporting.roots`),
    one bold line per root and its rows as :func:`fmt_row` sentences."""
    rows = {r["id"]: r for r in doc["claims"]}
    out: list[str] = []
    for k, root in enumerate(doc["roots"]["roots"], 1):
        n = len(root["rows"])
        out += [f"{k}. **`{root['root']}`** ({n} row{'s' if n > 1 else ''}): {root['error']}."]
        out += ["    " + fmt_row(rows[i]) for i in root["rows"]]
    loose = doc["roots"]["unattributed"]
    return out + ([f"{len(doc['roots']['roots']) + 1}. **no named root**:"] + ["    " + fmt_row(rows[i]) for i in loose]
                  if loose else [])
