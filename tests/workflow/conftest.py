"""A temp copy of the repository with the tiny parameters, shared by the workflow tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import copy_repo, tiny_params

BIN = Path(sys.executable).parent


def env() -> dict:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}:{e['PATH']}"
    e.setdefault("HF_HUB_OFFLINE", "1")
    return e


def run(cmd, cwd, check=True, timeout=1200) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    return p


def write_params(path: Path, **overrides) -> dict:
    """Write a complete params.yaml: the tiny set plus overrides (DVC reads only this file)."""
    from villani.plan.config import dump_yaml

    p = tiny_params(**overrides)
    dump_yaml(p, path)
    return p


def git_repo(work: Path) -> Path:
    """Make ``work`` a git repository with everything committed (DVC needs one)."""
    run(["git", "init", "-q"], cwd=work)
    run(["git", "add", "-A"], cwd=work)
    run(["git", "commit", "-qm", "tiny"], cwd=work)
    return work


@pytest.fixture(scope="session")
def snakemake_done(tmp_path_factory):
    """The whole tiny DAG run once with Snakemake (local profile) in a repo copy whose
    params.yaml is the tiny set (so the run is of the committed parameters, as `make run`
    is, and records its outputs in dvc.lock); later runs may add tests/configs/tiny.yaml,
    which changes no value."""
    work = copy_repo(tmp_path_factory.mktemp("smk"))
    write_params(work / "params.yaml")
    git_repo(work)
    run([BIN / "snakemake", "--profile", "profiles/local", "--cores", "2"], cwd=work)
    return work
