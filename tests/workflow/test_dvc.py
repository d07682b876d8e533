"""The same DAG through real DVC: repro, per-λ status, experiments with -S, metrics diff."""

from __future__ import annotations

import json

import pytest

from tests.conftest import copy_repo
from tests.workflow.conftest import BIN, run, write_params

pytestmark = pytest.mark.slow


def _git(work, *args):
    return run(["git", *args], cwd=work)


@pytest.fixture(scope="module")
def dvc_repo(tmp_path_factory):
    work = copy_repo(tmp_path_factory.mktemp("dvc"))
    write_params(work / "params.yaml")
    _git(work, "init", "-q")
    assert (work / ".dvc" / "config").exists(), "the repository ships its DVC setup"
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "tiny")
    run([BIN / "dvc", "repro"], cwd=work)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "repro")
    return work


def _status(work) -> dict:
    return json.loads(run([BIN / "dvc", "status", "--json"], cwd=work).stdout or "{}")


def test_repro_produces_metrics_and_is_then_up_to_date(dvc_repo):
    metrics = json.loads((dvc_repo / "results/metrics/tiny.json").read_text())
    assert metrics["dataset"] == "tiny"
    assert _status(dvc_repo) == {}


def test_plots_read_the_figure_csvs(dvc_repo):
    out = json.loads(run([BIN / "dvc", "plots", "show", "--json"], cwd=dvc_repo).stdout)
    text = json.dumps(out)
    for name in ("fig5_training_curves.csv", "fig7_psi_vs_ppl.csv", "fig9_trace_cv.csv"):
        assert name in text
    assert "errors" not in out or not out["errors"], out.get("errors")


def test_push_and_pull_through_the_local_remote(dvc_repo):
    run([BIN / "dvc", "push", "-q"], cwd=dvc_repo)
    measured = dvc_repo / "results/runs/tiny/adamw/lam0.01/seed0/measure"
    before = {f.name: f.read_bytes() for f in measured.iterdir()}
    import shutil

    shutil.rmtree(measured)
    shutil.rmtree(dvc_repo / ".dvc" / "cache")
    assert "measure@0.01-0" in _status(dvc_repo)
    run([BIN / "dvc", "pull", "-q"], cwd=dvc_repo)
    assert {f.name: f.read_bytes() for f in measured.iterdir()} == before
    assert _status(dvc_repo) == {}


def test_changing_one_lambda_marks_only_its_stages(dvc_repo):
    write_params(dvc_repo / "params.yaml", train={"lambdas": [0.0, 0.02], "noise": {"lambdas": [0.02]}})
    try:
        changed = set(_status(dvc_repo))
        assert "train@0.02-0" in changed and "measure@0.02-0" in changed
        assert "train@0.0-0" not in changed and "measure@0.0-0" not in changed
        assert "tokenize" not in changed and "rays" not in changed
    finally:
        _git(dvc_repo, "checkout", "params.yaml")


def test_experiment_with_set_param_differs(dvc_repo):
    run([BIN / "dvc", "exp", "run", "-n", "bigger-lambda", "-S", "train.lambdas=[0.0,0.02]",
         "-S", "train.noise.lambdas=[0.02]"], cwd=dvc_repo)
    show = json.loads(run([BIN / "dvc", "exp", "show", "--json"], cwd=dvc_repo).stdout)
    text = json.dumps(show)
    assert "bigger-lambda" in text
    diff = json.loads(run([BIN / "dvc", "metrics", "diff", "--json", "HEAD"], cwd=dvc_repo).stdout)
    entries = diff["results/metrics/tiny.json"]
    # the new λ's headline numbers appear in the diff: new values where HEAD had none
    added = [k for k, v in entries.items() if "0.02" in k and v.get("old") is None and v.get("new") is not None]
    assert added, entries
