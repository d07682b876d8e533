"""The named strong-treatment configuration (configs/strong.yaml): a decay budget λ·η·T ≥ 1 —
far beyond the paper's 0.069 — beside the paper's 1e-3 and 1e-2 matched by λ·η·T, 4 seeds,
AdamW only; a complete parameter document (DVC finds every key it reads) whose DAG builds
(the command docs/results.md prints, as a dry run)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, documentation
from tests.workflow.conftest import BIN, run
from villani.plan.config import load_params, read_yaml
from villani.plan.paper_lambda import PAPER_LR, PAPER_STEPS, decay_budget, match


def _params():
    return load_params([REPO / "params.yaml", REPO / "configs" / "strong.yaml"])


def test_strong_config_spans_the_papers_budgets_and_a_budget_where_decay_acts():
    p = _params()
    t = p["train"]
    budgets = sorted(decay_budget(lam, t["lr"], t["steps"]) for lam in t["lambdas"])
    assert budgets[0] == 0.0 and budgets[-1] >= 1.0 >= 1e-2 * PAPER_LR * PAPER_STEPS, budgets
    assert sum(b >= 1.0 for b in budgets) >= 2  # two λ past a budget of 1: a dose, not one point
    assert match(p, "middle").ours is not None and match(p, "strong").ours is not None
    assert set(p["landscape"]["lambdas"]) == {0.0, match(p, "middle").ours}  # Fig 3 at the paper's 1e-3
    assert len(t["seeds"]) >= 4 and t["adam_l2"]["lambdas"] == t["langevin"]["lambdas"] == []
    assert p["data"]["name"] == "strong"  # its own results, ledger results/claims/strong.json


def test_strong_config_is_a_complete_parameter_document():
    """`villani dvc-yaml --check --params configs/strong.yaml`: DVC finds every key it reads, so
    the file alone is the run's parameters (as params.yaml is)."""
    from tests.workflow.test_stage_keys import _villani
    from villani.dag import dvc_yaml

    p = _villani("dvc-yaml", "--check", "--params", "configs/strong.yaml")
    assert p.returncode == 0, p.stderr
    assert dvc_yaml.missing_keys(read_yaml(REPO / "configs" / "strong.yaml")) == []


STRONG_COMMAND = "snakemake --profile profiles/local --configfile configs/strong.yaml"


@pytest.mark.slow
def test_the_readmes_strong_command_builds_its_dag():
    """The documentation prints the strong treatment's command (docs/results.md); run as printed (a
    dry run of every job: -n --forceall, whatever a results/ folder beside the checkout holds)."""
    assert re.search(rf"^\s*{re.escape(STRONG_COMMAND)}(\s+#.*)?$", documentation(), re.M), "docs: the strong command"
    out = run([BIN / w if i == 0 else w for i, w in enumerate(STRONG_COMMAND.split())]
              + ["-n", "--forceall", "--quiet", "rules"], cwd=REPO)
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.stdout, re.M)}
    # 5 λ × 4 seeds, AdamW only: one train and one measure job per run (params.yaml's jobs)
    assert counts["train"] == counts["measure"] == 20 and counts["landscape"] == 2, out.stdout[-2000:]
    assert counts["claims"] == 1, out.stdout[-2000:]
