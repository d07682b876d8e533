"""The Snakemake report's opening text is written from the run's parameters
(villani.report.description), for the shipped parameter files."""

from __future__ import annotations

import os

import jinja2
import pytest
from docutils.core import publish_parts

from tests.conftest import REPO
from villani.plan.config import deep_merge, read_yaml, resolve
from villani.report.description import FIXED_PART, description, write_description


def shipped(name: str, **overrides) -> dict:
    return resolve(deep_merge(read_yaml(REPO / name), overrides), source=name)


def test_the_default_run_is_described_by_its_parameters():
    text = description(shipped("params.yaml"), ["params.yaml"])
    assert "This run, from ``params.yaml``" in text
    assert "``gpt_neo`` (hidden_size 64, num_layers 2, num_heads 4, intermediate_size 256, window_size 32)" in text
    assert "bpe tokenizer, vocabulary 512, sequences of 64 tokens" in text
    assert "14 runs: each λ × seeds {0, 1}, 240 steps" in text  # 4 AdamW λ + noisy AdamW + Adam on F + Langevin, × 2 seeds
    assert "AdamW (decoupled weight decay) at λ ∈ {0.0, 0.0012, 0.012, 0.12} (η = 0.003, 20 warm-up steps)" in text
    assert "AdamW + gradient noise (not eq. 36) at λ ∈ {0.12} (gradient noise σ = 0.05)" in text
    assert "Adam on F (coupled L2) at λ ∈ {0.12}" in text
    assert "Langevin SGD on F (eq. 36) at λ ∈ {0.12} (η = 0.075 constant, β = table1)" in text
    assert "steps {0, 80, 160, 240} of every run (4 per run, 56 in all; linear steps)" in text
    assert "**claims ledger**: ``results/claims/pydoc.csv``" in text
    assert "GPT-Neo language models" not in text and "noise-injection" not in text


def test_another_family_rule_set_and_schedule_change_the_text():
    p = shipped("params.yaml", model={"config": {"model_type": "llama", "hidden_size": 32}},
                train={"lambdas": [0.0, 0.02], "adam_l2": {"lambdas": []}, "langevin": {"lambdas": []},
                       "adamw_noise": {"lambdas": [0.02]}, "checkpoints": {"count": 12, "spacing": "log"}},
                landscape={"lambdas": [0.0, 0.02]})
    text = description(p, ["params.yaml", "mine.yaml"])
    assert "from ``params.yaml`` + ``mine.yaml``" in text
    assert "``llama`` (hidden_size 32," in text
    assert "AdamW (decoupled weight decay) at λ ∈ {0.0, 0.02}" in text
    assert "AdamW + gradient noise (not eq. 36) at λ ∈ {0.02} (gradient noise σ = 0.05)" in text
    assert "Adam on F" not in text and "Langevin" not in text
    assert "6 runs" in text and "log steps" in text and "{0, 1, …, 240}" in text  # 13 checkpoints, abbreviated


def test_the_paper_preset_describes_each_dataset_and_its_named_model():
    text = description(shipped("configs/paper.yaml"), ["configs/paper.yaml"])
    for ds in ("ptb", "wikitext103"):
        assert f"*Dataset* ``{ds}``" in text and f"``results/claims/{ds}.csv``" in text
    assert text.count("``EleutherAI/gpt-neo-125m`` (its config), from pretrained weights") == 2
    assert "84000 steps" in text and "1145000 steps" in text
    # PTB's measurement schedule is said; WikiText-103 keeps every spectrum
    assert text.count("at every 20th checkpoint and the last (4 per run), elsewhere Ψ_s and the trace only "
                      "(doubly stochastic Hutchinson, 1 probe(s) per group on 1 fresh block(s) of 64)") == 1
    assert text.count("the lr / warm-up sweep arms at their first and last checkpoint only") == 1


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # writer_name, as Snakemake calls it
def test_the_written_file_renders_as_snakemake_renders_it(tmp_path):
    """Jinja2 with snakemake.config and the report's files, then docutils; a parameter
    value that looks like Jinja stays text."""
    p = shipped("params.yaml", model={"name": "models/odd{{x}}{#y#}"})
    path = write_description(p, ["mine.yaml", "params.yaml"], ["mine.yaml"], dest=tmp_path / "d.rst")
    rst = open(path, encoding="utf-8").read()
    assert rst.endswith(FIXED_PART.read_text(encoding="utf-8"))
    config = type("Snakemake", (), {"config": p})
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as snakemake.report makes it
    html = publish_parts(env.from_string(rst).render(snakemake=config, files=[], categories={}),
                         writer_name="html")["html_body"]
    assert "System Message" not in html and "<li>Langevin SGD on F (eq. 36)" in html  # valid rst, nested list
    tt = '<tt class="docutils literal">'
    assert f"from {tt}params.yaml</tt> + {tt}mine.yaml</tt>" in html
    assert "models/odd{{x}}{#y#}" in html
    assert "results/claims/pydoc.csv" in html

    before = os.stat(path).st_mtime_ns
    os.utime(path, ns=(before - 10**9, before - 10**9))
    write_description(p, ["mine.yaml", "params.yaml"], ["mine.yaml"], dest=tmp_path / "d.rst")  # same: left alone
    assert os.stat(path).st_mtime_ns == before - 10**9
