"""The claims ledger on a constructed results tree: a supported, a refuted and an
inconclusive verdict where we built them, every claim of the issue has a row, and claims
whose bound fails its hypotheses say so instead of giving a number."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from tests.figures.conftest import figure_params
from tests.figures.synthetic import build_results
from villani.bounds.table import write_bounds
from villani.claims.ledger import COLUMNS, paper_lambdas, write_claims
from villani.tracking.metrics import claims_metrics
from villani.plan import layout
from villani.plan.runs import runs
from villani.plan.schedule import checkpoint_steps
from villani.psi import psi_key

REQUIRED = {
    "fig2_lam0_saturates", "fig2_slope_lam1e-2", "fig3_bowl", "fig3_valley_to_bowl", "fig4_lammax_linear",
    "fig4_ratio_rises_with_lam", "fig5_faster_with_lam", "fig5_envelope_holds", "fig5_envelope_tracks",
    "fig6_ratio_weak", "fig6_ratio_strong", "fig6_r2", "fig7_r2_strong", "fig7_r2_zero", "fig7_r2_rises_with_lam",
    "fig8_cv_early", "fig8_cv_middle", "fig8_cv_late", "fig8_shapiro", "fig9_cv_sqrt_2d_over_M", "fig9_cv_plateau",
    "table3_trace_over_lam_d", "table3_trace_ratio", "table3_rel_error_strong", "appB_error_below_3pct",
}


def _set_perplexity(root, p, variant, lam, fn):
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
            path.write_text(json.dumps(rec))


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    p = figure_params()
    p["claims"]["bootstrap"] = 400
    root = build_results(tmp_path_factory.mktemp("claims"), p, cost=False)
    rng = np.random.default_rng(0)
    # λ = 0: perplexity falls as Ψ_s rises (the paper's claim) → supported
    _set_perplexity(root, p, "adamw", 0.0, lambda psi, step, seed: 500.0 - 0.5 * psi + 0.01 * seed)
    # λ = 0.01: perplexity rises with Ψ_s → refuted
    _set_perplexity(root, p, "adamw", 0.01, lambda psi, step, seed: 100.0 + 0.05 * psi + 0.01 * seed)
    # Langevin: perplexity unrelated to Ψ_s → inconclusive
    _set_perplexity(root, p, "langevin", 0.01, lambda psi, step, seed: 100.0 + rng.normal(0, 5))
    write_bounds(p, root)
    write_claims(p, root)
    with open(layout.fmt(layout.CLAIMS_CSV, root, dataset=p["data"]["name"])) as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    return p, root, rows


def test_constructed_supported_refuted_inconclusive(ledger):
    _, _, rows = ledger
    assert rows["fig7_direction_adamw_lam0"]["verdict"] == "supported"
    assert float(rows["fig7_direction_adamw_lam0"]["ci_high"]) < 0
    assert rows["fig7_direction_adamw_lam0p01"]["verdict"] == "refuted"
    assert float(rows["fig7_direction_adamw_lam0p01"]["ci_low"]) > 0
    assert rows["fig7_direction_langevin_lam0p01"]["verdict"] == "inconclusive"
    lo, hi = (float(rows["fig7_direction_langevin_lam0p01"][k]) for k in ("ci_low", "ci_high"))
    assert lo < 0 < hi


def test_every_claim_has_a_row_with_interval_and_verdict(ledger):
    p, root, rows = ledger
    assert REQUIRED <= set(rows)
    header = open(layout.fmt(layout.CLAIMS_CSV, root, dataset=p["data"]["name"])).readline().strip().split(",")
    assert tuple(header) == COLUMNS
    for r in rows.values():
        assert r["verdict"] in ("supported", "refuted", "inconclusive")
        assert r["paper_statement"] and r["statistic"] and r["claimed_region"] and r["measured_on"]
        if r["estimate"] and r["ci_low"]:
            assert float(r["ci_low"]) <= float(r["ci_high"])
        if not r["ci_low"]:
            assert r["verdict"] == "inconclusive" and r["note"], r["id"]
    assert all("." not in k and "=" not in k for k in rows)  # ids are flat metrics.json keys


def test_a_bound_whose_hypotheses_fail_gives_no_statistic(ledger):
    _, _, rows = ledger
    for cid in ("fig6_ratio_strong", "fig6_r2"):
        r = rows[cid]
        assert r["verdict"] == "inconclusive" and r["estimate"] == "" and r["ci_low"] == ""
        assert "hypotheses hold at 0 of" in r["note"] and "KL bound is ≥ 0" in r["note"]
    # the synthetic Langevin run meets Theorem 2's hypotheses; eq. (41) as printed is violated at step 0
    assert rows["fig5_envelope_holds"]["verdict"] == "refuted"
    assert "langevin" in rows["fig5_envelope_holds"]["measured_on"]


def test_metrics_codes_match_the_csv(ledger):
    p, root, rows = ledger
    codes = claims_metrics(root, p["data"]["name"])["claims"]
    want = {"supported": 1, "inconclusive": 0, "refuted": -1}
    assert all(codes[cid] == want[r["verdict"]] for cid, r in rows.items())
    assert codes["n_supported"] + codes["n_refuted"] + codes["n_inconclusive"] == len(rows)


def test_paper_lambdas_map_by_rank():
    assert paper_lambdas([0.0, 0.1, 1.0]) == {"zero": 0.0, "weak": 0.1, "middle": 0.1, "strong": 1.0}
    assert paper_lambdas([0.0, 1e-4, 1e-3, 1e-2]) == {"zero": 0.0, "weak": 1e-4, "middle": 1e-3, "strong": 1e-2}
    assert paper_lambdas([0.5]) == {"zero": None, "weak": 0.5, "middle": 0.5, "strong": 0.5}
