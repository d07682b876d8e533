"""The claims ledger on a constructed results tree: a supported, a refuted and an
inconclusive verdict where we built them, every registered claim has a row (the id list is
the registry's), claims whose bound fails its hypotheses say so instead of giving a number,
a collapsed run decides nothing, and λ is matched by λ·η·T."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from tests.figures.conftest import figure_params
from tests.figures.synthetic import build_results, write_record
from villani.bounds.table import write_bounds
from villani.claims.ledger import COLUMNS, claim_rows, write_claims
from villani.claims.registry import catalogue
from villani.tracking.metrics import claims_metrics
from villani.plan import layout
from villani.plan.runs import runs
from villani.plan.schedule import checkpoint_steps
from villani.psi import psi_key

#: every claim declared in the registry (families by their id pattern)
REGISTERED = {c["id"] for c in catalogue()}


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
            write_record(root, p, r, step, rec)
    if (layout.fmt(layout.BOUNDS_DIR, root, dataset=p["data"]["name"]) / "bounds.json").exists():
        write_bounds(p, root)  # as the workflow does after the measurements change


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    p = figure_params()
    p["train"]["lr"] = 0.35  # λ·η·T = 0.01 · 0.35 · 24 = 0.084: our λ = 0.01 is the paper's 10⁻²
    root = build_results(tmp_path_factory.mktemp("claims"), p, cost=False)
    rng = np.random.default_rng(0)
    # λ = 0: perplexity falls as Ψ_s rises (the paper's claim) → supported
    _set_perplexity(root, p, "adamw", 0.0, lambda psi, step, seed: 100.0 - 0.5 * psi + 0.5 * math.sin(step))
    # λ = 0.01: perplexity rises with Ψ_s → refuted
    _set_perplexity(root, p, "adamw", 0.01, lambda psi, step, seed: 100.0 + 0.05 * psi + 0.05 * math.sin(step))
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
    static = {i for i in REGISTERED if "<" not in i}
    assert static <= set(rows) and len(REGISTERED) >= 40
    families = [i.split("<")[0] for i in REGISTERED if "<" in i]
    assert all(any(r.startswith(f) for r in rows) for f in families)
    header = open(layout.fmt(layout.CLAIMS_CSV, root, dataset=p["data"]["name"])).readline().strip().split(",")
    assert tuple(header) == COLUMNS
    for r in rows.values():
        assert r["verdict"] in ("supported", "refuted", "inconclusive", "untestable")
        assert r["paper_statement"] and r["statistic"] and r["claimed_region"] and r["measured_on"]
        if r["estimate"] and r["ci_low"]:
            assert float(r["ci_low"]) <= float(r["ci_high"])
        if not r["ci_low"]:
            assert r["verdict"] in ("inconclusive", "untestable") and r["note"], r["id"]
        if r["ci_low"] and r["ci_method"] and not r["ci_method"].startswith("exact"):
            assert float(r["ci_low"]) < float(r["ci_high"]), r["id"]  # no zero-width interval from sampling
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
    codes = claims_metrics(p, root)["claims"]
    want = {"supported": 1, "inconclusive": 0, "refuted": -1, "untestable": 0}
    assert all(codes[cid] == want[r["verdict"]] for cid, r in rows.items())
    assert sum(codes[f"n_{v}"] for v in want) == len(rows)


def test_rows_record_the_paper_lambda_and_ours_with_both_budgets(ledger):
    _, _, rows = ledger
    r = rows["fig7_r2_strong"]
    assert float(r["paper_lambda"]) == 0.01 and float(r["our_lambda"]) == 0.01
    assert float(r["paper_budget"]) == pytest.approx(0.084) and float(r["our_budget"]) == pytest.approx(0.084)
    # no λ of ours has the budget of the paper's 10⁻³: the row says so and decides nothing
    m = rows["fig8_cv_middle"]
    assert m["our_lambda"] == "" and m["verdict"] == "inconclusive" and "has no match" in m["note"]


def test_arithmetic_claims_are_refuted_at_any_scale(ledger):
    _, _, rows = ledger
    assert rows["fig9_cv_sqrt_2d_over_M"]["verdict"] == "refuted"
    assert float(rows["fig9_cv_sqrt_2d_over_M"]["estimate"]) == pytest.approx(math.sqrt(2 * 1.25e8 / 64), rel=1e-3)
    assert rows["fig6_below_diagonal_conservative"]["verdict"] == "refuted"
    assert rows["fig10_single_gpu_1b"]["verdict"] == "untestable" and "GPU" in rows["fig10_single_gpu_1b"]["note"]


def test_a_collapsed_run_decides_nothing(ledger, tmp_path):
    """The λ = 0.01 AdamW run of seed 1 ends at perplexity ≥ V/2: its checkpoints leave the
    Fig 7 rows, which name it; with every run of that λ collapsed there is no statistic."""
    import shutil

    p, root, rows = ledger
    root2 = tmp_path / "results"
    shutil.copytree(root, root2)
    _set_perplexity(root2, p, "adamw", 0.01, lambda psi, step, seed: 400.0 if seed == 1 else 100.0 + 0.05 * psi)
    got = {r["id"]: r for r in claim_rows(p, root2)}
    row = got["fig7_direction_adamw_lam0p01"]
    assert row["collapsed_runs_left_out"] == 1 and "adamw λ = 0.01 seed 1 (final val ppl 400" in row["note"]
    assert "seeds 0," in row["measured_on"] and "seeds 0, 1" not in row["measured_on"]
    _set_perplexity(root2, p, "adamw", 0.01, lambda psi, step, seed: 300.0)
    got = {r["id"]: r for r in claim_rows(p, root2)}
    row = got["fig7_direction_adamw_lam0p01"]
    assert row["estimate"] is None and row["verdict"] == "inconclusive" and row["collapsed_runs_left_out"] == 2


def test_the_theory_arm_collapsing_is_a_finding_not_a_silence(ledger, tmp_path):
    """fig5_langevin_learns is the one row about collapsed runs: the synthetic Langevin runs
    learn (no refutation from 2 of 2, whose exact interval reaches below 0.95); every
    Langevin run at perplexity ≥ V/2 refutes it, with η, β = 1/λ and the final perplexities."""
    import shutil

    p, root, rows = ledger
    r = rows["fig5_langevin_learns"]
    assert r["verdict"] == "inconclusive" and float(r["estimate"]) == 1.0 and float(r["ci_low"]) < 0.95
    root2 = tmp_path / "results"
    shutil.copytree(root, root2)
    _set_perplexity(root2, p, "langevin", 0.01, lambda psi, step, seed: 400.0)
    row = {x["id"]: x for x in claim_rows(p, root2)}["fig5_langevin_learns"]
    assert row["verdict"] == "refuted" and row["estimate"] == 0.0 and row["ci_method"].startswith("Clopper")
    assert "0 of 2 runs learned" in row["note"] and "final validation perplexity λ = 0.01 seed 0: 400" in row["note"]
    assert "βλ = 1" in row["note"] and row["collapsed_runs_left_out"] == 0


def test_claims_report_writes_the_three_parts_between_the_readme_markers(ledger, tmp_path, capsys):
    """`villani claims-report --write README.md`: the arithmetic, the refutations with the run's
    scale, the untestable claims — numbers from the ledger; a file without markers is a one-line error."""
    from ruamel.yaml import YAML

    from villani.cli import main
    from villani.claims.report import END, START

    p, root, rows = ledger
    params = tmp_path / "params.yaml"
    YAML().dump(p, params)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nold text\n{END}\n\nafter\n")
    assert main(["claims-report", "--params", str(params), "--results", str(root), "--write", str(readme)]) == 0
    text = readme.read_text()
    assert "old text" not in text and text.endswith(f"{END}\n\nafter\n")
    for part in ("### Wrong at any scale", "### Contradicted at laptop scale", "### Not testable here"):
        assert part in text
    assert "`fig9_cv_sqrt_2d_over_M`" in text and "1.98e+03" in text  # √(2·1.25e8/64)
    assert "d = 136,832 parameters" in text and "seeds 0, 1" in text and "paper λ = 0.01 ↔ our λ = 0.01" in text
    assert "`fig10_single_gpu_1b`" in text.split("### Not testable here")[1]
    refuted = [i for i, r in rows.items() if r["verdict"] == "refuted" and not r["note"].startswith("wrong at any")]
    section = text.split("### Contradicted at laptop scale")[1].split("### Not testable here")[0]
    assert refuted and all(f"`{i}`" in section for i in refuted)
    readme.write_text("no markers\n")
    assert main(["claims-report", "--params", str(params), "--results", str(root), "--write", str(readme)]) == 2
    assert "no '<!-- claims-report:start -->'" in capsys.readouterr().err
