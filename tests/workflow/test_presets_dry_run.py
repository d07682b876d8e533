"""The paper presets build their DAG offline: `snakemake -n` of configs/paper.yaml (both
corpora; each one's jobs are those of configs/ptb.yaml and configs/wikitext103.yaml, see
tests/test_datasets_config.py) with the job counts the README prints."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.workflow.conftest import BIN, run

pytestmark = pytest.mark.slow


def test_the_combined_paper_preset_builds_its_dag_offline_with_the_readme_job_counts():
    out = run([BIN / "snakemake", "-n", "--quiet", "rules", "--configfile", "configs/paper.yaml"], cwd=REPO)
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", out.stdout, re.M)}
    assert counts == {"fetch": 2, "pretrained": 2, "tokenize": 2, "train": 1440, "measure": 3330, "landscape": 4,
                      "rays": 2, "bounds": 2, "cost": 2, "figures": 2, "claims": 2, "metrics": 2, "paper": 1,
                      "all": 1, "total": 4794}, out.stdout[-2000:]
    assert "| `configs/paper.yaml` | 2 + 2 | 2 | 1,440 | 3,330 | 2 + 4 + 2 + 2 + 2 + 2 + 2 | 1 | 4,794 |" in (
        REPO / "README.md").read_text()
