r"""``villani claims``: one row per quantitative claim of the paper, with our statistic, its
confidence interval and a verdict — ``results/claims/{dataset}.csv`` (the text) and
``results/claims/{dataset}.json`` (the same rows with every number, the λ match and the
intervals' methods).

The claims are declared next to their computations, one module per figure or table
(:mod:`villani.claims.registry`: :func:`~villani.claims.registry.claims`). The verdict is
:func:`villani.claims.verdict.verdict` of the interval and the claim's region — per unit
where a claim is tested on independent units (Fig 2's rays) — or ``untestable`` where
this scale cannot decide the claim (the note says what would). No claim is decided on a
collapsed run (:mod:`villani.collapse`): their checkpoints are left out and the row names
them. Each row records the paper's λ it is about and ours, with both λ·η·T
(:mod:`villani.plan.paper_lambda`).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any, Mapping

from villani.claims.context import Context
from villani.claims.registry import Claim, Measured, claims
from villani.claims.verdict import CODES, INCONCLUSIVE, UNTESTABLE, unit_verdict, verdict
from villani.io import atomic
from villani.io.records import write_sealed
from villani.io.results import record_inputs
from villani.plan import layout

__all__ = ["COLUMNS", "claim_row", "claim_rows", "write_claims"]

COLUMNS = ("id", "source", "paper_statement", "paper_value", "statistic", "claimed_region", "estimate", "ci_low",
           "ci_high", "confidence", "ci_method", "measured_on", "paper_lambda", "our_lambda", "paper_budget",
           "our_budget", "collapsed_runs_left_out", "verdict", "note")


def _verdict(c: Claim, got: Measured) -> str:
    if not got.testable:
        return UNTESTABLE
    if got.units:
        return unit_verdict(verdict(iv, c.region) for _, iv in got.units)
    return INCONCLUSIVE if got.interval is None else verdict(got.interval, c.region)


def claim_row(c: Claim, got: Measured) -> dict[str, Any]:
    """The row (:data:`COLUMNS`) of one claim and what its computation returned."""
    iv, mt = got.interval, got.match
    note = got.note
    if iv is not None and (iv.low is None or iv.high is None) and got.testable:
        note = (note + "; " if note else "") + "no interval: " + iv.method.rsplit("— no interval: ", 1)[-1]
    return {
        "id": c.id, "source": c.source, "paper_statement": c.statement, "paper_value": c.paper_value,
        "statistic": c.statistic, "claimed_region": c.region.text,
        "estimate": None if iv is None else iv.estimate, "ci_low": None if iv is None else iv.low,
        "ci_high": None if iv is None else iv.high, "confidence": None if iv is None else iv.confidence,
        "ci_method": "" if iv is None else iv.method, "measured_on": got.measured_on,
        "paper_lambda": None if mt is None else mt.paper, "our_lambda": None if mt is None else mt.ours,
        "paper_budget": None if mt is None else mt.paper_budget, "our_budget": None if mt is None else mt.our_budget,
        "collapsed_runs_left_out": len(got.excluded), "verdict": _verdict(c, got),
        "note": note if mt is None or mt.ours is not None else (note or mt.text()),
    }


def claim_rows(params: Mapping, root=layout.RESULTS) -> list[dict[str, Any]]:
    """Every claim's row, in the order of the paper."""
    ctx = Context(params, root)
    return [claim_row(c, c.compute(ctx)) for c in claims(params)]


def _cell(x) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.4g}"
    return str(x)


def write_claims(params: Mapping, root=layout.RESULTS) -> str:
    """Write ``claims/{dataset}.csv`` and ``claims/{dataset}.json``; return a one-line summary."""
    rows = claim_rows(params, root)
    csv_path = layout.fmt(layout.CLAIMS_CSV, root, dataset=params["data"]["name"])
    json_path = layout.fmt(layout.CLAIMS_JSON, root, dataset=params["data"]["name"])
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(r[k]) for k in COLUMNS})
    atomic.write_text(csv_path, buf.getvalue())
    counts = {v: sum(r["verdict"] == v for r in rows) for v in CODES}
    write_sealed(json_path, {
        "dataset": params["data"]["name"], "rule": "docs/claims.md", "counts": counts, "claims": rows,
        "inputs": record_inputs(params, root)})
    return (f"{csv_path}: {len(rows)} claims — "
            + ", ".join(f"{k} {v}" for k, v in counts.items()))
