"""Snakemake's own checks of the workflow files: `snakemake --lint` and `snakefmt --check`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, copy_repo

BIN = Path(sys.executable).parent


@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_snakemake_lint_is_clean(tmp_path):
    work = copy_repo(tmp_path)
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    p = subprocess.run([BIN / "snakemake", "--lint"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    text = p.stdout + p.stderr
    assert p.returncode == 0 and "Lints for" not in text, text[-4000:]
    assert "your workflow is in a good condition" in text, text[-2000:]


def test_snakefmt_leaves_every_workflow_file_unchanged():
    p = subprocess.run([BIN / "snakefmt", "--check", "Snakefile", "workflow"], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "would be changed" not in p.stderr
