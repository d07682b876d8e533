r"""The README's sensitivity analysis, one factor at a time: the chain of designs of
:mod:`villani.claims.reporting.design` between the main ledger's parameters and another's, as Markdown.

1. **the chain** — one line per design: the factor that changed from the design before (and
   every key it changed), its λ with their decay budgets λ·η·T, seeds and steps, the treatment
   at the λ matched to the paper's 10⁻² and at its largest λ (the change of final ‖θ‖² and of
   validation perplexity against λ = 0, beside the between-seed SD of that perplexity and the SD
   of the per-seed difference, the contrast the within-seed statistics use), its measured
   verdicts and how many changed;
2. **each link's changes** — every row whose verdict changed there, before and after, with the λ
   the row uses on each side;
3. **attribution** — the rows whose verdict differs between the two ends of the chain, by the
   factor of the link where they changed (a row that changes at several links is listed at each).

Nothing in the text is chosen by hand: the factors, keys, numbers and rows come from the chain.
"""

from __future__ import annotations

from typing import Mapping

from villani.claims.reporting.design import attribution, flips
from villani.claims.reporting.text import num

__all__ = ["chain_section", "treatment_cell"]


def treatment_cell(t: Mapping | None) -> str:
    """``λ 0.047 (λ·η·T 0.085): ‖θ‖² −2.1 %, ppl +0.87 vs seed SD 1.26, paired SD 0.31 [−0.1, 1.8]``."""
    if not t or "delta_val_ppl" not in t:
        return "no learned runs to compare" if t else "—"
    ci = t.get("paired_ci_val_ppl")
    paired = ("" if t.get("paired_sd_val_ppl") is None else
              f", per-seed difference SD {num(t['paired_sd_val_ppl'])}"
              + (f", 95 % CI [{num(ci[0])}, {num(ci[1])}]" if ci else ""))
    return (f"λ {t['lam']:g} (λ·η·T {t['budget']:.2g}): ‖θ‖² {100 * t['delta_theta_sq_rel']:+.1f} %, perplexity "
            f"{t['delta_val_ppl']:+.3g} vs seed SD {num(t['seed_sd_val_ppl'])}{paired}")


def _cell(r: Mapping | None) -> str:
    if r is None:
        return "no row"
    ci = "" if r["ci_low"] is None else f" [{num(r['ci_low'])}, {num(r['ci_high'])}]"
    return f"{r['verdict']} {num(r['estimate'])}{ci}"


def _lams(r: Mapping | None) -> str:
    return "—" if r is None or not r.get("lams") else ", ".join(f"{x:g}" for x in r["lams"])


def _design_lines(doc: Mapping) -> list[str]:
    out = ["| # | design | factor changed (what changed) | λ (λ·η·T) | seeds | T | at the paper's 10⁻² | "
           "at the largest λ | measured: supported / refuted / inconclusive | verdicts changed |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    prev = None
    for k, d in enumerate(doc["designs"]):
        lam = ", ".join(f"{x:g} ({b:.2g})" for x, b in zip(d["lambdas"], d["budgets"]))
        m = d["measured"]
        changed = "—" if prev is None else str(len(flips(prev, d)))
        factor = ("start" if not d["factor"] else f"**{d['factor']}**: {d['change']}") + (
            f" ({d['grid']})" if d.get("grid") else "")
        out.append(f"| {k} | {d['name']} | {factor} | {lam} | {', '.join(map(str, d['seeds']))} | {d['steps']} | "
                   f"{treatment_cell(d['treatment'].get('paper 1e-2'))} | "
                   f"{treatment_cell(d['treatment'].get('largest λ'))} | "
                   f"{m['supported']} / {m['refuted']} / {m['inconclusive']} | {changed} |")
        prev = d
    return out


def _link_lines(doc: Mapping) -> list[str]:
    out: list[str] = []
    ds = doc["designs"]
    for k in range(1, len(ds)):
        a, b = ds[k - 1], ds[k]
        ids = flips(a, b)
        gone = [i for i in a["rows"] if i not in b["rows"]]
        new = [i for i in b["rows"] if i not in a["rows"]]
        head = f"**{k - 1} → {k}, {b['factor']}** ({b['change']}): verdicts changed: {len(ids)}"
        extra = "".join(f"; rows {w}: {', '.join(f'`{i}`' for i in ids_)}" for w, ids_ in
                        (("only before", gone), ("new", new)) if ids_)
        out += ["", head + extra + "."]
        if ids:
            out += ["", "| claim | class | before | after | λ the row uses (before → after) |", "|---|---|---|---|---|"]
            out += [f"| `{i}` | {b['rows'][i]['class']} | {_cell(a['rows'][i])} | {_cell(b['rows'][i])} | "
                    f"{_lams(a['rows'][i])} → {_lams(b['rows'][i])} |" for i in ids]
    return out


def _attribution_lines(doc: Mapping) -> list[str]:
    ds = doc["designs"]
    first, last = ds[0], ds[-1]
    ends = flips(first, last)
    where = attribution(doc)
    by: dict[int, list[str]] = {}
    for i in ends:
        for k, before, after in where.get(i, []):
            by.setdefault(k, []).append(f"`{i}` ({before} → {after})")
    back = [i for i in where if i not in ends and i in last["rows"] and i in first["rows"]]
    out = ["", f"**Attribution.** {len(ends)} of {len(first['rows'])} verdicts differ between `{first['name']}` "
               f"and `{last['name']}`; by the link where each changed:", ""]
    out += [f"- {ds[k]['factor']} ({k - 1} → {k}): {', '.join(by[k])}" for k in sorted(by)] or ["- none"]
    if back:
        out += [f"- changed along the chain and back (same verdict at both ends): "
                f"{', '.join(f'`{i}`' for i in back)}"]
    return out


def chain_section(doc: Mapping) -> list[str]:
    """The sensitivity section of one chain (:func:`villani.claims.reporting.design.chain_doc`)."""
    ds = doc["designs"]
    data = ("the same token files" if doc["same_data"] else
            "**different token files** (the training link changes the data too)")
    out = [f"### Sensitivity, one factor at a time: `{doc['main']}` → `{doc['other']}`", "",
           f"{len(ds)} ledgers, each computed from runs that exist, each differing from the one before in one factor "
           f"(`villani.claims.reporting.design`); a verdict that changes between two is attributed to that link's factor. "
           f"Within each design every λ has the same seeds, steps, data and measurement"
           f"{'' if all(not d.get('grid') for d in ds) else ' unless its line says otherwise'}; `{ds[0]['dataset']}` and "
           f"`{ds[-1]['dataset']}` are {data} (sha256 of the tokenizer and the three splits). Treatments are "
           "against λ = 0 at the last checkpoint, means over seeds.", ""]
    return out + _design_lines(doc) + _link_lines(doc) + _attribution_lines(doc)
