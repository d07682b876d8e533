"""Two corpora through the whole DAG in one Snakemake invocation.

Two small generated corpora (tests/workflow/corpora.py) go through the code paths of the
paper presets — ``alpha`` through ``source: files``, ``beta`` through ``hf:<local folder>``
and from a pretrained model saved once by the pretrained rule — with
tests/configs/two_corpora.yaml (different λ lists and schedules per dataset, as
PTB's and WikiText-103's differ). Every dataset gets its own results, the cross-dataset
figures and tables hold both, and a checkpoint reopened with ``from_pretrained`` gives
the loss the measurement recorded.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from tests.conftest import copy_repo
from tests.workflow.conftest import BIN, run
from tests.workflow.corpora import write_corpora
from villani.dag import targets
from villani.plan import layout
from villani.plan.config import dataset_names, dataset_params, load_params
from villani.plan.runs import Run

pytestmark = pytest.mark.slow

CONFIG = "tests/configs/two_corpora.yaml"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """(resolved document, repo copy) after one `snakemake` run of both corpora."""
    work = copy_repo(tmp_path_factory.mktemp("two-corpora"))
    write_corpora(work)
    run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", CONFIG, "--cores", "2"], cwd=work)
    return load_params([work / "params.yaml", work / CONFIG]), work


def test_each_dataset_has_its_results_and_the_paper_outputs_hold_both(two):
    doc, work = two
    assert dataset_names(doc) == ["alpha", "beta"]
    for f in targets.all_outputs(doc):
        assert (work / f).exists() and (work / f).stat().st_size > 0, f
    for ds, source in (("alpha", "files"), ("beta", "hf:corpora/beta")):
        metrics = json.loads((work / f"results/metrics/{ds}.json").read_text())
        assert metrics["adamw"]["lam0p01"]["val_ppl"] > 0  # the path names the dataset
        assert json.loads((work / f"results/data/{ds}/stats.json").read_text())["source"] == source
    corpora = pd.read_csv(work / "results/tables/paper/alpha+beta/table2_corpora.csv")
    assert list(zip(corpora["dataset"], corpora["split"])) == [
        (ds, s) for ds in ("alpha", "beta") for s in ("train", "validation", "test")]
    for ds, g in corpora.groupby("dataset"):
        stats = json.loads((work / f"results/data/{ds}/stats.json").read_text())
        assert list(g["tokens"]) == [stats["splits"][s]["tokens"] for s in ("train", "validation", "test")]
    trace = pd.read_csv(work / "results/tables/paper/alpha+beta/table3_trace_stats.csv")
    assert list(zip(trace["dataset"], trace["lam"])) == [("alpha", 0.0), ("alpha", 0.01), ("beta", 0.01)]
    curves = pd.read_csv(work / "results/figures/paper/alpha+beta/fig5_training_curves.csv")
    assert curves.groupby("dataset")["step"].max().to_dict() == {"alpha": 12, "beta": 8}
    pac = pd.read_csv(work / "results/figures/paper/alpha+beta/fig6_pac_bayes.csv")
    assert set(pac["dataset"]) == {"alpha", "beta"} and (pac["lam"] > 0).all()


def test_the_pretrained_model_is_saved_once_and_beta_starts_from_it(two):
    from safetensors.torch import load_file

    doc, work = two
    alpha = json.loads((work / "results/pretrained/alpha/pretrained.json").read_text())
    assert alpha["name"] is None and not (work / "results/pretrained/alpha/config.json").exists()  # no model.name
    record = json.loads((work / "results/pretrained/beta/pretrained.json").read_text())
    assert record["name"] == "corpora/neo" and record["init"] == "pretrained" and record["weights_sha256"]
    assert json.loads((work / "results/fetch/beta.json").read_text())["model"]["where"] == "local"
    start = load_file(str(Run("beta", "adamw", 0.01, 0).path(layout.CKPT_WEIGHTS, work / "results", step=0)))
    given = load_file(str(work / "corpora/neo/model.safetensors"))
    assert start.keys() == given.keys() and all(torch.equal(start[k], given[k]) for k in given)


def test_a_checkpoint_reopens_with_from_pretrained_at_the_measured_loss(two):
    from transformers import AutoModelForCausalLM

    from villani.data import load_blocks
    from villani.training.checkpoint import load_run_model

    doc, work = two
    p, root = dataset_params(doc, "beta"), work / "results"
    run_, step = Run("beta", "adamw", 0.01, 0), 8
    theirs = AutoModelForCausalLM.from_pretrained(run_.path(layout.CKPT_DIR, root, step=step)).float().eval()
    ours, _ = load_run_model(p, root, run_, step, device="cpu")
    x = load_blocks(layout.fmt(layout.SPLIT, root, dataset="beta", split="validation"))
    with torch.no_grad():
        loss_theirs = float(theirs(input_ids=x, labels=x).loss)
        loss_ours = float(ours(input_ids=x, labels=x).loss)
    measured = json.loads(run_.path(layout.MEASURE_JSON, root, step=step).read_text())["val_loss"]
    assert loss_theirs == pytest.approx(loss_ours, rel=1e-5)
    assert loss_theirs == pytest.approx(measured, rel=1e-4)


def test_second_invocation_is_a_no_op(two):
    _, work = two
    out = run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", CONFIG, "--cores", "2", "-n"],
              cwd=work)
    assert "Nothing to be done" in out.stdout + out.stderr


def test_a_job_per_run_is_refused_in_one_line_where_the_corpora_differ_in_steps(two):
    """params.yaml's job per run names a run's files by step; these corpora's steps differ."""
    _, work = two
    (work / "per-run.yaml").write_text("jobs: {measure: run, train: segment}\n")
    out = run([BIN / "snakemake", "-n", "--configfile", CONFIG, "per-run.yaml"], cwd=work, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    line = next(ln for ln in text.splitlines() if 'jobs.measure: "run" is invalid' in ln)
    assert line.endswith("differ — checkpoints: alpha 2 up to step 12; beta 2 up to step 8)"), line
    assert "rule " not in text, text[-2000:]
