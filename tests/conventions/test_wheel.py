"""The package as a user installs it: a wheel (not editable) in a fresh venv, used from
another directory. The schema and the report captions must come from inside the package.

The fresh venv gets the wheel only; its dependencies (torch, jsonschema, …) are borrowed
from the test environment through a path entry *after* the venv's own site-packages, so
``villani`` itself can only come from the wheel — and the workflow's dependencies
(Snakemake, DVC and their plugins: the ``workflow`` and ``slurm`` extras) are not
borrowed, so the CLI and the engine are shown to work without them."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO, copy_repo

pytestmark = pytest.mark.slow


def _run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert p.returncode == 0, f"{cmd} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = copy_repo(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    # the build requirements of pyproject.toml are in the test environment (lock file)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, src])
    (whl,) = out.glob("villani-*.whl")
    return whl


def test_wheel_holds_schema_captions_and_license(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "villani/schemas/params.schema.yaml" in names
    captions = {n for n in names if n.startswith("villani/report/") and n.endswith(".rst")}
    from villani.figures import REGISTRY
    from villani.figures.paper import REGISTRY as PAPER

    assert {f"villani/report/{n}.rst" for n in REGISTRY} | {"villani/report/workflow.rst"} <= captions
    assert {f"villani/report/paper/{n}.rst" for n in PAPER} <= captions
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: MIT" in text


WORKFLOW = ("snakemake", "dvc")  # the distributions the workflow extras add, with their plugins and parts


def test_the_workflow_needs_an_extra(wheel):
    """Snakemake and DVC are required only with the ``workflow`` extra, the SLURM plugin with ``slurm``."""
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    reqs = [Requirement(r) for r in Parser().parsestr(zipfile.ZipFile(wheel).read(meta).decode()).get_all("Requires-Dist")]
    plain = {r.name for r in reqs if r.marker is None}
    extra = {r.name: str(r.marker) for r in reqs if r.marker is not None}
    assert {"torch", "transformers", "jsonschema"} <= plain and not any(n.startswith(WORKFLOW) for n in plain), plain
    assert extra["snakemake"] == extra["dvc"] == 'extra == "workflow"', extra
    assert extra["snakemake-executor-plugin-slurm"] == 'extra == "slurm"', extra


def _deps_without_the_workflow(tmp_path: Path) -> Path:
    """The test environment's site-packages, as links, less Snakemake, DVC and their parts."""
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(WORKFLOW) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    return deps


def test_installed_wheel_runs_from_another_directory(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel])
    site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(site) / "zz_test_deps.pth").write_text(f"{_deps_without_the_workflow(tmp_path)}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([py, "-c", "import villani; print(villani.__file__)"], cwd=elsewhere, env=env).stdout.strip()
    assert where.startswith(str(venv)), where
    for name in WORKFLOW:  # not installed: the engine and the CLI below run without them
        gone = subprocess.run([py, "-c", f"import {name}"], cwd=elsewhere, env=env, capture_output=True, text=True)
        assert gone.returncode == 1 and "ModuleNotFoundError" in gone.stderr, (name, gone.stderr[-500:])
    from villani import __version__

    villani = venv / "bin" / "villani"
    assert _run([villani, "--version"], cwd=elsewhere, env=env).stdout.strip() == f"villani {__version__}"
    ok = _run([villani, "validate", "--params", REPO / "params.yaml"], cwd=elsewhere, env=env)
    assert ok.stdout.startswith("ok: "), ok.stdout
    bad = elsewhere / "bad.yaml"
    bad.write_text("measure:\n  s_values: [0.0]\n")
    p = subprocess.run([villani, "--params", bad, "validate"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "measure.s_values[0]: 0.0 is invalid" in p.stderr, p.stderr
    engine = _run([py, "-c", "import torch; from villani.curvature import hutchinson; "
                   "print(hutchinson(torch.eye(5), 64).mean)"], cwd=elsewhere, env=env).stdout.strip()
    assert float(engine) == 5.0  # the README's example: every Rademacher sample of tr I is exact
    caps = _run([py, "-c", "from villani.figures import CAPTIONS; import pathlib; "
                 "print(all(pathlib.Path(c).is_file() for c in CAPTIONS.values()), next(iter(CAPTIONS.values())))"],
                cwd=elsewhere, env=env).stdout.split()
    assert caps[0] == "True" and caps[1].startswith(str(venv)), caps
