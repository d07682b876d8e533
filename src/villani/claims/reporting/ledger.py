r"""``villani claims``: one row per quantitative claim of the paper, with our statistic, its
confidence interval, a verdict, its class, the root error of an arithmetic refutation
(:mod:`villani.claims.reporting.roots`), the premises it rests on (``rests_on``; ``void`` names the failed ones,
:mod:`villani.claims.reporting.chain`) and — for the measured ones — a power plan and the family-wise verdict:
``results/claims/{dataset}.csv`` (the paper's claims),
``results/claims/{dataset}_findings.csv`` (our findings, never counted as the paper's) and
``results/claims/{dataset}.json`` (both tables with every number, the counts by class ×
verdict, the multiplicity summary and the treatment the runs applied).

The claims are declared next to their computations, one module per figure or table
(:mod:`villani.claims.catalogue.registry`). The verdict is :func:`villani.claims.catalogue.verdict.verdict` of the
interval and the claim's region — per unit where a claim is tested on independent units
(Fig 2's rays) — or ``untestable`` where this scale cannot decide the claim. Each row's class
is *arithmetic*, *measured here* or *needs scale* (:func:`~villani.claims.catalogue.registry.row_class`);
a measured row carries its power plan (:mod:`villani.claims.reporting.power`) and its Holm verdict over
the measured rows of its table (:mod:`villani.claims.reporting.multiplicity`). No claim is decided on a
collapsed run (:mod:`villani.diagnostics.collapse`). Each row records the paper's λ it is about and ours,
with both λ·η·T (:mod:`villani.plan.paper_lambda`).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any, Mapping

from villani.claims.reporting import chain, power
from villani.claims.catalogue.context import Context
from villani.claims.reporting.multiplicity import decision_p, family
from villani.claims.catalogue.registry import CLASSES, FINDINGS, MEASURED, PAPER, Claim, Measured, claims, row_class
from villani.claims.reporting.roots import root_of, summary
from villani.claims.catalogue.verdict import CODES, INCONCLUSIVE, NOT_A_RESULT, UNTESTABLE, unit_verdict, verdict
from villani.io import tables
from villani.io.records import write_sealed
from villani.io.results import record_inputs
from villani.plan import layout
from villani.plan.paper_lambda import PAPER_LAMBDAS

__all__ = ["COLUMNS", "claim_row", "claim_rows", "ledger", "write_claims"]

#: The columns of the claims CSVs: a claim row's keys in its schema (``claims.schema.yaml``'s
#: ``$defs/claim``), but table, lams and power_note (``villani/schemas/claims.table.yaml``).
COLUMNS = tables.columns("claims")


def _verdict(c: Claim, got: Measured) -> str:
    if not got.reported:
        return NOT_A_RESULT
    if not got.testable:
        return UNTESTABLE
    if got.units:
        return unit_verdict(verdict(iv, c.region) for _, iv in got.units)
    return INCONCLUSIVE if got.interval is None else verdict(got.interval, c.region)


def _power(ctx: Context, c: Claim, got: Measured) -> dict[str, Any]:
    """The power columns of a measured row (empty for the other classes)."""
    out = {"p_value": None, "treatment_theta_sq": None, "treatment_val_ppl": None, "seed_sd_val_ppl": None,
           "seed_sd": None, "min_effect": None, "seeds_to_decide": ""}
    if row_class(c, got) != MEASURED:
        return out
    out["p_value"] = got.p_value if got.p_value is not None else decision_p(got.interval, c.region, got.units)
    lams = getattr(got.measured_on, "lams", ())
    tr = power.treatment(ctx.m, getattr(got.measured_on, "variant", ""), lams) if lams else {}
    out.update({"treatment_theta_sq": tr.get("delta_theta_sq_rel"), "treatment_val_ppl": tr.get("delta_val_ppl"),
                "seed_sd_val_ppl": tr.get("seed_sd_val_ppl")})
    pl = power.plan(got.interval, c.region) if not got.units else {
        "seed_sd": None, "min_effect": None, "seeds_to_decide": "",
        "power_note": "per-unit verdicts (each ray's interval is over its probes, not over seeds)"}
    out.update({"seed_sd": pl["seed_sd"], "min_effect": pl["min_effect"],
                "seeds_to_decide": pl["seeds_to_decide"] or f"n/a: {pl['power_note']}",
                "power_note": pl["power_note"] if pl["seeds_to_decide"] else ""})
    return out


def claim_row(c: Claim, got: Measured, ctx: Context | None = None) -> dict[str, Any]:
    """The row (:data:`COLUMNS`) of one claim and what its computation returned."""
    iv, mt = got.interval, got.match
    note, cls, v = got.note, row_class(c, got), _verdict(c, got)
    if iv is not None and (iv.low is None or iv.high is None) and got.testable:
        note = (note + "; " if note else "") + "no interval: " + iv.method.rsplit("— no interval: ", 1)[-1]
    row = {
        "id": c.id, "class": cls, "table": c.table, "source": c.source, "paper_statement": c.statement,
        "paper_value": c.paper_value, "statistic": c.statistic, "claimed_region": c.region.text,
        "estimate": None if iv is None else iv.estimate, "ci_low": None if iv is None else iv.low,
        "ci_high": None if iv is None else iv.high, "confidence": None if iv is None else iv.confidence,
        "ci_method": "" if iv is None else iv.method, "measured_on": str(got.measured_on),
        "paper_lambda": None if mt is None else mt.paper, "our_lambda": None if mt is None else mt.ours,
        "paper_budget": None if mt is None else mt.paper_budget, "our_budget": None if mt is None else mt.our_budget,
        "runs_left_out": len(got.excluded), "verdict": v, "root": root_of(c.id, cls, v),
        "lams": list(getattr(got.measured_on, "lams", ())),
        "decided_by": got.decides, "price_gpu_h": got.price_gpu_h,
        "note": note if mt is None or mt.ours is not None else (note or mt.text()),
    }
    row.update(_power(ctx, c, got) if ctx is not None else {"p_value": None})
    return row


def _rows(ctx: Context) -> tuple[list[dict], dict, dict]:
    """The rows, their Holm summaries per table and the premises' status (each row's ``rests_on``
    and ``void`` set by :func:`villani.claims.reporting.chain.mark`)."""
    rows = [claim_row(c, c.compute(ctx), ctx) for c in claims(ctx.params)]
    alpha = 1.0 - ctx.confidence
    fams = {table: family([r for r in rows if r["table"] == table], alpha) for table in (PAPER, FINDINGS)}
    return rows, fams, chain.mark(rows)


def claim_rows(params: Mapping, root=layout.RESULTS) -> list[dict[str, Any]]:
    """Every row — the paper's claims, then our findings — in the order of the paper, with the
    Holm verdicts set per table."""
    return _rows(Context(params, root))[0]


def counts(rows: list[dict]) -> dict:
    """Rows by verdict, and by class × verdict."""
    return {"verdicts": {v: sum(r["verdict"] == v for r in rows) for v in CODES},
            "by_class": {k: {v: sum(r["class"] == k and r["verdict"] == v for r in rows) for v in CODES}
                         for k in CLASSES}}


def ledger(params: Mapping, root=layout.RESULTS, ctx: Context | None = None) -> dict:
    """The JSON document: the paper's claims and our findings (each with its counts and Holm
    summary), the arithmetic refutations' root errors (:func:`villani.claims.reporting.roots.summary`) and the
    treatment the AdamW runs applied between the smallest and largest λ (``ctx``: the results as read
    for a design of :mod:`villani.claims.reporting.design`)."""
    ctx = ctx or Context(params, root)
    rows, fams, premises = _rows(ctx)
    paper = [r for r in rows if r["table"] == PAPER]
    found = [r for r in rows if r["table"] == FINDINGS]
    lams = list(params.train.lambdas)
    return {"dataset": params["data"]["name"], "rule": "docs/claims.md", "counts": counts(paper)["verdicts"],
            "counts_by_class": counts(paper)["by_class"], "counts_void": chain.void_counts(paper, CLASSES),
            "premises": premises, "roots": summary(paper), "multiplicity": fams[PAPER], "claims": paper,
            "findings": {"counts": counts(found)["verdicts"], "multiplicity": fams[FINDINGS], "rows": found},
            "treatment": dict(power.treatment(ctx.m, "adamw", lams)) if len(lams) > 1 else {}, "scale": scale(ctx)}


def scale(ctx: Context) -> dict:
    """What the run is (the report's scale line): d, tokens per run, steps, seeds, vocabulary,
    the λ match, the update rules' decay budgets and the runs that decide nothing."""
    m = ctx.m[ctx.m["variant"] == "adamw"]
    last = m[m["step"] == m["step"].max()]
    t = ctx.params["train"]
    budgets = [lam * t.lr * t.steps for lam in t.lambdas]
    last = ctx.m.sort_values("step").groupby(["variant", "lam", "seed"]).tail(1)
    collapsed = sorted(f"{r.variant} λ = {r.lam:g} seed {int(r.seed)} (val ppl {r.val_ppl:.4g})"
                       for r in last[~last["run_learned"]].itertuples())
    return {"d": int(m["d"].iloc[0]) if len(m) else None,
            "tokens_per_run": int(last["tokens_seen"].max()) if len(last) else None,
            "steps": t.steps, "seeds": list(t.seeds), "vocab": ctx.vocab,
            "unigram_val_ppl": ctx.baseline,
            "lambdas": list(t.lambdas), "largest_budget": max(budgets),
            "lambda_match": "; ".join(mt.text() for mt in (ctx.match(n) for n in PAPER_LAMBDAS)),
            "runs_deciding_nothing": collapsed}


def _cell(x) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.4g}"
    return str(x)


def _write_csv(path, rows: list[dict]) -> None:
    """The rows as a claims CSV (:data:`COLUMNS`, numbers to 4 significant digits, None empty),
    checked against the table's schema first."""
    import pandas as pd

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(r[k]) for k in COLUMNS})
    tables.write("claims", path, pd.DataFrame([{k: r[k] for k in COLUMNS} for r in rows], columns=list(COLUMNS)),
                 text=buf.getvalue())


def write_claims(params: Mapping, root=layout.RESULTS) -> str:
    """Write the claims CSV, the findings CSV and the JSON; return a one-line summary."""
    doc = ledger(params, root)
    ds = params["data"]["name"]
    csv_path = layout.fmt(layout.CLAIMS_CSV, root, dataset=ds)
    _write_csv(csv_path, doc["claims"])
    _write_csv(layout.fmt(layout.CLAIMS_FINDINGS_CSV, root, dataset=ds), doc["findings"]["rows"])
    write_sealed(layout.fmt(layout.CLAIMS_JSON, root, dataset=ds), {**doc, "inputs": record_inputs(params, root)},
                 "claims")
    by_class = "; ".join(f"{k}: " + ", ".join(f"{v} {n}" for v, n in c.items() if n)
                         for k, c in doc["counts_by_class"].items())
    void = sum(doc["counts_void"].values())
    return (f"{csv_path}: {len(doc['claims'])} claims of the paper ({by_class}; {void} void: resting on a failed "
            "premise); "
            f"{len(doc['findings']['rows'])} findings; Holm keeps {doc['multiplicity']['survive']} of "
            f"{doc['multiplicity']['decided']} measured decisions")
