"""A temp copy of the repository with the tiny parameters, shared by the workflow tests.

The copy's ``params.yaml`` is the shipped one with the values of ``tests/configs/tiny.yaml``
written over it — as a user edits values — never a document expanded with the schema's
defaults: DVC reads only what the file says, so the tests see what a user's DVC sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TINY, copy_repo, tiny_params

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


def _write_over(doc, values) -> None:
    """Set ``values`` (nested) in a round-trip YAML document in place: mappings key by key,
    lists and values replaced, comments, order and flow style kept."""
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            _write_over(doc[key], value)
        elif isinstance(value, list) and isinstance(doc.get(key), list):
            doc[key][:] = value
        else:
            doc[key] = value


def write_params(path: Path, **overrides) -> dict:
    """Write params.yaml: the shipped file with the tiny values and ``overrides`` (group →
    dict) written over it as a user edits it — its comments and layout kept, no key added
    from the schema; return the resolved parameters."""
    from ruamel.yaml import YAML

    from villani.plan.config import read_yaml

    yaml = YAML()
    doc = yaml.load((REPO / "params.yaml").read_text())
    _write_over(doc, read_yaml(TINY))
    _write_over(doc, overrides)
    with open(path, "w") as f:
        yaml.dump(doc, f)
    return tiny_params(**overrides)


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


# `make run`'s command (the Makefile), with the two cores of the test machine
MAKE_RUN = [BIN / "villani", "run-lock", "--brief", "--", BIN / "snakemake", "--profile", "profiles/local", "--cores",
            "2"]


@pytest.fixture(scope="session")
def dvc_repo(tmp_path_factory):
    """A clean clone with the committed files (params.yaml: the tiny values written over
    the shipped file), after `make run`'s command, its dvc.lock committed."""
    work = git_repo(copy_repo(tmp_path_factory.mktemp("dvc")))
    assert (work / ".dvc" / "config").exists(), "the repository ships its DVC setup"
    write_params(work / "params.yaml")
    run(["git", "commit", "-qam", "tiny values"], cwd=work)
    assert not (work / "dvc.lock").exists(), "no dvc.lock is shipped: the first run writes it"
    out = run(MAKE_RUN, cwd=work, timeout=2400)
    (work / ".make-run.log").write_text(out.stdout + out.stderr)
    run(["git", "add", "dvc.lock"], cwd=work)
    run(["git", "commit", "-qm", "make run"], cwd=work)
    return work
