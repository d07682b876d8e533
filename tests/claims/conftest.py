"""The constructed results tree every ledger test reads: the synthetic results of the figures'
tests with the corpus's unigram baseline, three Fig 7 verdicts built in, bounds and ledger written."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from tests.figures.conftest import figure_params
from tests.figures.synthetic import build_results, write_record
from villani.bounds.table import write_bounds
from villani.claims.reporting.ledger import write_claims
from villani.plan.config import resolve
from villani.claims.catalogue.registry import catalogue
from villani.plan import layout
from villani.plan.runs import runs
from villani.plan.schedule import checkpoint_steps
from villani.diagnostics.psi import psi_key

#: every claim declared in the registry (families by their id pattern)
REGISTERED = {c["id"]: c for c in catalogue()}
#: the corpus's unigram validation perplexity written into the synthetic stats.json
UNIGRAM = 250.0


def set_perplexity(root, p, variant, lam, fn):
    """Rewrite val_ppl of every checkpoint of (variant, λ) as fn(Ψ_s, step, seed)."""
    s = psi_key(p["measure"]["s_values"][0])
    for r in runs(p, (variant,)):
        if r.lam != lam:
            continue
        for step in checkpoint_steps(p["train"]):
            path = r.path(layout.MEASURE_JSON, root, step=step)
            rec = json.loads(path.read_text())
            rec["val_ppl"] = fn(rec["psi_s"][s], step, r.seed)
            rec["val_loss"] = math.log(rec["val_ppl"])
            write_record(root, p, r, step, rec)
    if (layout.fmt(layout.BOUNDS_DIR, root, dataset=p["data"]["name"]) / "bounds.json").exists():
        write_bounds(p, root)  # as the workflow does after the measurements change


def _with_baseline(root, p, unigram=UNIGRAM):
    path = layout.fmt(layout.DATA_STATS, root, dataset=p["data"]["name"])
    stats = json.loads(path.read_text())
    stats["baselines"] = {"unigram": {"val_ppl": unigram, "val_loss": math.log(unigram)}}
    path.write_text(json.dumps(stats))


def _csv(path):
    with open(path) as f:
        return {r["id"]: r for r in csv.DictReader(f)}


@pytest.fixture(scope="session")
def ledger(tmp_path_factory):
    p = figure_params().to_dict()
    p["train"]["lr"] = 0.35  # λ·η·T = 0.01 · 0.35 · 24 = 0.084 (the paper's 0.0693 × 1.21): our λ = 0.01 is its 10⁻²
    p = resolve(p)
    root = build_results(tmp_path_factory.mktemp("claims"), p, cost=False)
    _with_baseline(root, p)
    rng = np.random.default_rng(0)
    # λ = 0: perplexity falls as Ψ_s rises (the paper's claim) → supported
    set_perplexity(root, p, "adamw", 0.0, lambda psi, step, seed: 100.0 - 0.5 * psi + 0.5 * math.sin(step))
    # λ = 0.01: perplexity rises with Ψ_s → refuted
    set_perplexity(root, p, "adamw", 0.01, lambda psi, step, seed: 100.0 + 0.05 * psi + 0.05 * math.sin(step))
    # Langevin: perplexity unrelated to Ψ_s → inconclusive
    set_perplexity(root, p, "langevin", 0.01, lambda psi, step, seed: 100.0 + rng.normal(0, 5))
    write_bounds(p, root)
    write_claims(p, root)
    ds = p["data"]["name"]
    rows = _csv(layout.fmt(layout.CLAIMS_CSV, root, dataset=ds))
    found = _csv(layout.fmt(layout.CLAIMS_FINDINGS_CSV, root, dataset=ds))
    return p, root, rows, found
