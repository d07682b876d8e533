"""villani.plan.writers: the command that writes each declared output of the shipped
parameters — the line every message about a missing or damaged file ends with (each kind
is run as printed in tests/hardening/test_suggested_commands.py and
tests/workflow/test_failed_jobs.py)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from villani.dag import targets
from villani.plan import writers
from villani.plan.config import load_params
from villani.plan.stages import STAGES


@pytest.fixture(autouse=True)
def _no_params_files():
    writers.use_params(None)
    yield
    writers.use_params(None)


def test_every_declared_output_has_the_command_of_the_stage_that_writes_it():
    p = load_params([REPO / "params.yaml"])
    seen = set()
    for name in STAGES:
        files = targets.paper_outputs(p) if name == "paper" else targets.stage_outputs(p, name)
        assert files, name
        for f in files:
            stage, wc = writers.writer(f)
            assert stage == name, (f, stage)
            cmd = writers.command(f, p)
            assert cmd.startswith(f"villani {name}") and ("--dataset pydoc" in cmd) == (name != "paper"), cmd
            seen.add(name)
    assert seen == set(STAGES)


@pytest.mark.parametrize("path, params, command", [
    ("results/runs/pydoc/adamw/lam0.012/seed0/measure/step0000240.parquet", False,
     "villani measure --dataset pydoc --variant adamw --lam 0.012 --seed 0 --step 240"),
    ("results/runs/pydoc/adamw/lam0.012/seed0/ckpt/step0000080/model.safetensors", True,
     "villani train --dataset pydoc --variant adamw --lam 0.012 --seed 0 --until 160"),
    ("results/runs/pydoc/adamw/lam0.012/seed0/ckpt/step0000080/model.safetensors", False,
     "villani train --dataset pydoc --variant adamw --lam 0.012 --seed 0 --all"),
    ("results/runs/pydoc/langevin/lam0.12/seed1/logs/seg0000240.csv", False,
     "villani train --dataset pydoc --variant langevin --lam 0.12 --seed 1 --until 240"),
    ("results/claims/pydoc_findings.csv", False, "villani claims --dataset pydoc"),
    ("results/landscape/pydoc/lam0.012/surface.json", False, "villani landscape --dataset pydoc --lam 0.012"),
    ("results/figures/paper/ptb+wikitext103/fig6_pac_bayes.png", False, "villani paper"),
    ("/data/my results/data/pydoc/train.parquet", False, "villani tokenize --results '/data/my results' --dataset pydoc"),
    ("results/logs/train/pydoc.log", False, None),
])
def test_the_command_of_a_path(path, params, command):
    p = load_params([REPO / "params.yaml"]) if params else None
    assert writers.command(path, p) == command


def test_the_parameter_files_of_the_asking_command_are_named_unless_params_yaml():
    writers.use_params(["params.yaml"])
    assert writers.command("results/bounds/pydoc/bounds.json") == "villani bounds --dataset pydoc"
    writers.use_params(["params.yaml", "configs/strong.yaml"])
    assert writers.how_to_rewrite("results/bounds/strong/bounds.json", missing=True) == (
        "run `villani bounds --params params.yaml --params configs/strong.yaml --dataset strong` (or the workflow)")
    assert writers.how_to_rewrite("results/bounds/strong/bounds.json") == (
        "run `villani bounds --params params.yaml --params configs/strong.yaml --dataset strong`")
