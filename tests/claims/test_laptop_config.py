"""The named laptop configuration (configs/laptop.yaml, one command): valid, a
1–5M-parameter model, the paper's four λ matched by λ·η·T, the arms at its 10⁻², 3 seeds,
plain Hutchinson samples — and its DAG builds (`snakemake -n --configfile configs/laptop.yaml`)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.workflow.conftest import BIN, run
from villani.plan.config import load_params
from villani.plan.paper_lambda import PAPER_LAMBDAS, match


def _params():
    return load_params([REPO / "params.yaml", REPO / "configs" / "laptop.yaml"])


def test_laptop_config_matches_the_papers_lambdas_with_the_theorys_arms():
    p = _params()
    assert all(match(p, name).ours is not None for name in PAPER_LAMBDAS)
    strong = match(p, "strong").ours
    t = p["train"]
    assert t["adam_l2"]["lambdas"] == [strong] and t["langevin"]["lambdas"] == [strong]
    assert t["langevin"]["beta"] is None  # β = 1/λ, eq. (41)'s
    assert len(t["seeds"]) >= 3 and p["measure"]["trace_estimator"] == "hutchinson"


def test_laptop_model_has_1_to_5_million_parameters():
    from villani.model.causal_lm import build_model, num_params

    p = _params()
    d = num_params(build_model(p["model"], p["data"]["tokenizer"]["vocab_size"], p["data"]["seq_len"], seed=0))
    assert 1_000_000 <= d <= 5_000_000, d


@pytest.mark.slow
def test_laptop_config_builds_its_dag():
    out = run([BIN / "snakemake", "-n", "--quiet", "rules", "--configfile", "configs/laptop.yaml"], cwd=REPO)
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.stdout, re.M)}
    # params.yaml's jobs: one train job (2 segments) and one measure job (5 checkpoints) per run
    assert counts["train"] == counts["measure"] == 18 and counts["claims"] == 1, out.stdout[-2000:]
