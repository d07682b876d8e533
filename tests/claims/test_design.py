"""One factor at a time (villani.claims.reporting.design, villani.claims.reporting.sensitivity): the chain of designs
between two parameter sets — each link changes one factor, every design reads the runs that
exist — and the README's sensitivity command run as printed, on a synthetic results tree of
two designs shaped like params.yaml and configs/strong.yaml (a main design with three update
rules, 3 λ × 2 seeds; another, AdamW only, 3 λ × 3 seeds × 2.5× the steps, its λ at the main
design's decay budgets λ·η·T plus one larger), where a verdict is built to change with the
steps: the chain attributes it to the training link, not to λ or the seeds."""

from __future__ import annotations

import math
import re
import shutil

import pytest
from ruamel.yaml import YAML

from tests.claims.conftest import _with_baseline, set_perplexity
from tests.conftest import REPO, tiny_params
from tests.figures.synthetic import build_results
from villani.bounds.table import write_bounds
from villani.claims.reporting.design import FACTORS, chain, chain_doc, same_data
from villani.claims.reporting.ledger import ledger, write_claims
from villani.claims.reporting.results_page import END, START, VERDICTS_END, VERDICTS_START
from villani.claims.reporting.errors_page import WRONG_END, WRONG_START
from villani.cli import main
from villani.plan import layout
from villani.plan.config import resolve
from villani.plan.digest import differing_keys
from villani.plan.paper_lambda import decay_budget

MAIN = {"train": {"lambdas": [0.0, 0.002, 0.01], "seeds": [0, 1], "steps": 24, "warmup_steps": 4,
                  "checkpoints": {"count": 4}, "langevin": {"lambdas": [0.01], "beta": None}}}
#: AdamW only; 2.5× the steps (and twice the warm-up, one checkpoint more, as configs/strong.yaml);
#: λ 0.004 has the budget of the main design's 0.01, 0.05 is beyond; one seed more
OTHER = {"data": {"name": "tinystrong"},
         "train": {"lambdas": [0.0, 0.004, 0.05], "seeds": [0, 1, 2], "steps": 60, "warmup_steps": 8,
                   "checkpoints": {"count": 5}, "langevin": {"lambdas": []}},
         "landscape": {"lambdas": [0.0, 0.004]}}
#: which keys each factor may change between neighbours
ALLOWED = {"update rules": {"train.langevin.lambdas", "train.sweep.lr", "train.sweep.warmup_steps"},
           "λ grid": {"train.lambdas"}, "seeds": {"train.seeds"}, "λ": {"train.lambdas"}}
README_COMMAND = ("villani claims-report --write README.md docs/results.md docs/paper-errors.md "
                  "--sensitivity configs/strong.yaml")


def _params(over):
    return tiny_params(**over)


def _yaml(path, p):
    path.parent.mkdir(parents=True, exist_ok=True)
    YAML().dump(p.to_dict(), path)


@pytest.fixture(scope="module")
def two_designs(tmp_path_factory, tiny_data_root):
    """A checkout-like folder: params.yaml, configs/strong.yaml, README.md and results/ holding both
    designs' synthetic runs, token files, bounds and ledgers; λ = 0's perplexity falls with Ψ_s in
    the longer runs only (the paper's Fig 7 direction, supported there)."""
    top = tmp_path_factory.mktemp("design")
    p, q = _params(MAIN), _params(OTHER)
    root = top / "results"
    for x in (p, q):
        build_results(root, x, cost=False)
        _with_baseline(root, x)
        src, dst = (layout.fmt(layout.DATA_DIR, r, dataset=d) for r, d in ((tiny_data_root, "tiny"),
                                                                               (root, x["data"]["name"])))
        for f in (layout.TOKENIZER_FILE, *(layout.SPLIT_FILE.format(split=s) for s in ("train", "validation",
                                                                                        "test"))):
            shutil.copyfile(src / f, dst / f)
    set_perplexity(root, q, "adamw", 0.0, lambda psi, step, seed: 100.0 - 0.5 * psi + 0.5 * math.sin(step))
    for x in (p, q):
        write_bounds(x, root)
        write_claims(x, root)
    _yaml(top / "params.yaml", p)
    _yaml(top / "configs" / "strong.yaml", q)
    (top / "README.md").write_text(f"# x\n\n{VERDICTS_START}\nold\n{VERDICTS_END}\n")
    (top / "docs").mkdir()
    (top / "docs" / "results.md").write_text(f"# Results\n\n{START}\nold\n{END}\n")
    (top / "docs" / "paper-errors.md").write_text(f"# Errors\n\n{WRONG_START}\nold\n{WRONG_END}\n")
    return top, p, q


def test_each_link_of_the_chain_changes_one_factor():
    p, q = _params(MAIN), _params(OTHER)
    ds = chain(p, q)
    assert [d.factor for d in ds] == ["", "update rules", "λ grid", "training", "seeds", "λ"]
    assert {d.factor for d in ds[1:]} <= set(FACTORS)
    for a, b in zip(ds, ds[1:]):
        keys = set(differing_keys(a.params.to_dict(), b.params.to_dict()))
        if b.factor in ALLOWED:
            assert keys and keys <= ALLOWED[b.factor], (b.factor, keys)
        else:  # training: the budgets λ·η·T and the seeds stay, everything the other file changes goes
            assert "train.steps" in keys and "train.seeds" not in keys
            budgets = [[decay_budget(x, d.params.train.lr, d.params.train.steps) for x in d.params.train.lambdas]
                       for d in (a, b)]
            assert budgets[0] == pytest.approx(budgets[1], rel=0.01)
            assert "train.steps 24 → 60" in b.change and "train.warmup_steps 4 → 8" in b.change
    assert ds[0].params == p and ds[-1].params == q  # the ends are the two designs themselves
    assert list(ds[2].params.train.lambdas) == [0.0, 0.01]  # 0.002's budget has no counterpart


def test_the_chain_runs_either_way_and_refuses_designs_with_no_runs_in_common():
    p, q = _params(MAIN), _params(OTHER)
    back = chain(q, p)  # the main design is the larger: narrowed first, the other's rules added last
    assert [d.factor for d in back] == ["", "λ grid", "seeds", "training", "λ", "update rules"]
    assert back[-1].params == p and list(back[3].params.train.langevin.lambdas) == []
    with pytest.raises(ValueError, match="no runs in common"):
        chain(p, _params({**OTHER, "train": {**OTHER["train"], "seeds": [5, 6]}}))
    with pytest.raises(ValueError, match="no λ with the λ·η·T"):
        chain(_params({"train": {"lambdas": [0.5], "langevin": {"lambdas": []}}}), q)


@pytest.mark.slow  # 31 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_design_reads_the_same_files_as_its_tree(two_designs):
    """Restricting λ and seeds reads the tree's own runs: the full design's ledger through the chain
    is the one `villani claims` wrote; a narrower design's bounds rows are its runs'."""
    top, p, q = two_designs
    root = top / "results"
    doc = chain_doc(p, q, root)
    assert doc["same_data"] is True
    written = ledger(q, root)
    assert {r["id"]: r["verdict"] for r in written["claims"]} == {
        i: r["verdict"] for i, r in doc["designs"][-1]["rows"].items()}
    narrow = doc["designs"][3]  # the other design's runs at the main budgets and seeds
    assert narrow["seeds"] == [0, 1] and narrow["lambdas"] == [0.0, 0.004]


@pytest.mark.slow  # two designs' ledgers (fixture 11 s on 2 idle cores): past test-fast's 3-minute budget
def test_same_data_compares_the_token_files(two_designs, tmp_path):
    top, p, q = two_designs
    root = tmp_path / "results"
    shutil.copytree(top / "results" / "data", root / "data")
    assert same_data(p, q, root)
    split = layout.fmt(layout.SPLIT, root, dataset=q["data"]["name"], split="test")
    split.write_bytes(split.read_bytes() + b"\0")
    assert not same_data(p, q, root)
    split.unlink()
    with pytest.raises(ValueError, match="test.parquet: token data not found"):
        same_data(p, q, root)


@pytest.mark.slow  # 18 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_the_readmes_sensitivity_command_attributes_each_flip_to_its_link(two_designs, monkeypatch):
    """The README prints the command; run as printed in a folder laid out as a checkout."""
    top, p, q = two_designs
    readme = (REPO / "README.md").read_text()
    assert re.search(rf"^\s*{re.escape(README_COMMAND)}\s*$", readme, re.M), "README: the sensitivity command"
    monkeypatch.chdir(top)
    assert main(README_COMMAND.split()[1:]) == 0
    assert "`results/claims/tinystrong.json`" in (top / "README.md").read_text()  # the verdict table of both
    text = (top / "docs" / "results.md").read_text() + (top / "docs" / "paper-errors.md").read_text()
    sec = text.split("### Sensitivity, one factor at a time: `params.yaml` → `configs/strong.yaml`")[1]
    for part in ("| 0 | tiny | start |", "**update rules**: left out: langevin", "**λ grid**: left out λ 0.002",
                 "**training**: train.checkpoints.count 4 → 5", "λ 0.01 → 0.004", "**seeds**: seeds 0, 1 → 0, 1, 2",
                 "**λ**: λ 0.05 added", "**Attribution.**", "the same token files"):
        assert part in sec, part
    link = sec.split("**2 → 3, training**")[1].split("**3 → 4")[0]
    assert "| `fig7_direction_adamw_lam0` | measured here | inconclusive" in link and "| supported" in link
    attributed = sec.split("**Attribution.**")[1]
    assert re.search(r"- training \(2 → 3\): [^\n]*`fig7_direction_adamw_lam0` \(inconclusive → supported\)",
                     attributed), attributed
    assert "Treatment (tinystrong" in sec
    wrong = text.split(WRONG_START)[1]  # the other design's refutations, from its own ledger
    assert "**At the scale of `results/claims/tinystrong.json`**" in wrong


@pytest.mark.slow  # two designs' ledgers (fixture 11 s on 2 idle cores): past test-fast's 3-minute budget
def test_a_ledger_given_to_sensitivity_is_a_one_line_error(two_designs, monkeypatch, capsys):
    top, p, q = two_designs
    monkeypatch.chdir(top)
    assert main(["claims-report", "--sensitivity", "results/claims/tinystrong.json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "a ledger; give the other design's parameter file" in err


@pytest.mark.slow  # 27 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_ledger_whose_verdicts_are_not_its_designs_is_named(two_designs, tmp_path, monkeypatch, capsys):
    """The chain's end designs are the ledgers' own: a ledger (sealed, of the same measurements) whose
    verdicts differ from its design recomputed now — written by other code — is named."""
    import json

    from villani.io.records import RECORD_HASH, write_sealed

    top, p, q = two_designs
    work = tmp_path / "co"
    shutil.copytree(top, work)
    monkeypatch.chdir(work)
    path = work / "results" / "claims" / "tinystrong.json"
    doc = json.loads(path.read_text())
    row = next(r for r in doc["claims"] if r["id"] == "fig7_direction_adamw_lam0")
    row["verdict"] = "refuted"
    del doc[RECORD_HASH]
    write_sealed(path, doc, "claims")
    assert main(README_COMMAND.split()[1:]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "tinystrong.json: its verdicts differ" in err and "fig7_direction_adamw_lam0" in err


def test_resolve_keeps_the_shipped_strong_design_inside_one_chain():
    """configs/strong.yaml over params.yaml: the paper-matched λ of the default are inside the strong grid
    (by λ·η·T), so the chain from one to the other exists with one factor per link."""
    from villani.plan.config import load_params

    p = load_params([REPO / "params.yaml"])
    q = load_params([REPO / "params.yaml", REPO / "configs" / "strong.yaml"])
    ds = chain(resolve(p), resolve(q))
    assert [d.factor for d in ds] == ["", "update rules", "λ grid", "training", "seeds", "λ", "λ"]
    assert list(ds[3].params.train.lambdas) == [0.0, 0.0047, 0.047] and list(ds[3].params.train.seeds) == [0, 1]
