"""The paper presets build their DAG offline: `snakemake -n` of configs/paper.yaml (both
corpora; each one's jobs are those of configs/ptb.yaml and configs/wikitext103.yaml, see
tests/plan/test_datasets_config.py) with the job counts the documentation prints (docs/running/presets.md,
docs/running/laptop.md)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO, documentation
from tests.workflow.conftest import BIN, run

pytestmark = pytest.mark.slow


def test_the_combined_paper_preset_builds_its_dag_offline_with_the_readme_job_counts():
    out = run([BIN / "snakemake", "-n", "--quiet", "rules", "--configfile", "configs/paper.yaml"], cwd=REPO)
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.stdout, re.M)}
    assert counts == {"fetch": 2, "pretrained": 2, "tokenize": 2, "train": 480, "measure": 1914, "landscape": 4,
                      "rays": 2, "bounds": 2, "cost": 2, "figures": 2, "claims": 2, "metrics": 2, "paper": 1,
                      "plan": 2, "all": 1, "total": 2420}, out.stdout[-2000:]
    assert "| `configs/paper.yaml` | 2 + 2 + 2 | 2 | 480 | 1,914 | 2 + 4 + 2 + 2 + 2 + 2 + 2 | 1 | 2,420 |" in (
        documentation())


def test_the_default_trains_and_measures_each_run_in_one_job_with_the_readme_job_counts():
    """`make dryrun` on params.yaml as shipped: jobs {measure: run, train: run} — one `villani
    train --all` and one `villani measure --all` per run — and the job counts the documentation prints."""
    from villani.dag.submissions import job_counts
    from villani.plan.config import load_params

    out = run([BIN / "snakemake", "--profile", "profiles/local", "-n", "--forceall"], cwd=REPO)
    text = out.stdout + out.stderr
    stats = text[text.index("Job stats:"):]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M)}
    doc = load_params([REPO / "params.yaml"])
    assert counts == {**job_counts(doc), "total": sum(job_counts(doc).values())}, stats[:1500]
    for rule in ("train", "measure"):
        cmds = re.findall(rf"^Shell command: (?:exec )?villani {rule} [^\n]*", text, re.M)
        assert len(cmds) == counts[rule] == 14 and all(c.split(">")[0].rstrip().endswith("--all") for c in cmds), cmds
    assert (f"runs {counts['total']} jobs ({counts['train']} training jobs, {counts['measure']} measure jobs"
            in " ".join(documentation().split())), "the documentation: the default's job counts"
