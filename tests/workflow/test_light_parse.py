"""The workflow's parse stays light: reading the Snakefile, common.smk and the stage rules
imports no torch, transformers or matplotlib (what every `snakemake -n`, job-side
Snakemake on a cluster node and local job pays), checked on a fresh interpreter with
`python -X importtime`."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import copy_repo

HEAVY = ("torch", "transformers", "matplotlib")


def _imported(cmd, cwd) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "snakemake", *cmd], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+([\w.]+)\s*$", out.stderr, re.M))


@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_parsing_the_workflow_imports_no_heavy_library(tmp_path):
    work = copy_repo(tmp_path)
    modules = _imported(["--list-rules", "--configfile", "tests/configs/tiny.yaml"], work)
    assert "villani.dag.rules" in modules  # the parse did run the workflow's code
    assert not {m for m in modules if m.split(".")[0] in HEAVY}, sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_the_dry_run_of_the_dag_imports_no_torch(tmp_path):
    """`snakemake -n` builds every job (their resources too: plan.budget, no torch)."""
    work = copy_repo(tmp_path)
    modules = _imported(["-n", "--cores", "1", "--configfile", "tests/configs/tiny.yaml"], work)
    assert not {m for m in modules if m.split(".")[0] in HEAVY}
