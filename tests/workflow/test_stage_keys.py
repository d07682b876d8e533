"""DVC and Snakemake re-run a stage on the same parameters: dvc.yaml is generated from the
stage table (``villani dvc-yaml``) and is current; each DVC stage's ``params:`` covers
exactly the keys of the Snakemake digest of that stage (:func:`stage_keys`); and every
shipped single-dataset parameter file sets every key DVC reads (DVC takes no defaults)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.conftest import REPO, tiny_params
from villani.dag import dvc_yaml
from villani.plan.config import read_yaml
from villani.plan.digest import STAGES, stage_inputs

DVC_STAGE = {f"{stage}{suffix}": (stage, variant) for stage in ("train", "measure")
             for suffix, variant in (("_lr", "adamw_lr0.001"), ("_wu", "adamw_wu3"), ("_adamw_noise", "adamw_noise"),
                                     ("_adam_l2", "adam_l2"), ("_langevin", "langevin"))}
SHIPPED = ["params.yaml", "configs/ptb.yaml", "configs/wikitext103.yaml"]  # the single-dataset documents


def _leaves(d: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        out |= _leaves(v, key) if isinstance(v, dict) and v else {key}
    return out


def _expand(dotted: dict) -> set[str]:
    """Leaf paths of ``{dotted key: value}`` (a group's value expands to its leaves)."""
    out: set[str] = set()
    for k, v in dotted.items():
        out |= _leaves(v, k) if isinstance(v, dict) and v else {k}
    return out


def _dvc_stages() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.fixture(scope="module")
def p():
    return tiny_params()


@pytest.mark.parametrize("name", list(_dvc_stages()))
def test_dvc_params_are_the_snakemake_digest_keys(name, p):
    stage, variant = DVC_STAGE.get(name, (name, "adamw"))
    body = _dvc_stages()[name]
    body = body.get("do", body)
    leaves = _leaves(p)
    dvc = set()
    for key in body.get("params", []):
        covered = {leaf for leaf in leaves if leaf == key or leaf.startswith(key + ".")}
        assert covered, f"dvc.yaml stage {name}: params key {key!r} is not a parameter"
        dvc |= covered
    snakemake = _expand(stage_inputs(p, stage, variant))
    assert dvc == snakemake, (f"{name}: only in dvc.yaml {sorted(dvc - snakemake)}; "
                              f"only in the Snakemake digest {sorted(snakemake - dvc)}")


def test_every_stage_has_a_dvc_stage():
    names = {DVC_STAGE.get(n, (n,))[0] for n in _dvc_stages()}
    assert names == set(STAGES)


def _villani(*args) -> subprocess.CompletedProcess:
    """``villani ARGS`` in the repository (in this process: the CLI's own main)."""
    import contextlib
    import io
    import os

    from villani.cli import main

    out, err, cwd = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(args))
    finally:
        os.chdir(cwd)
    return subprocess.CompletedProcess(["villani", *args], rc, out.getvalue(), err.getvalue())


@pytest.mark.parametrize("params", SHIPPED)
def test_dvc_yaml_is_current_and_the_shipped_file_sets_every_key_it_reads(params):
    """What `make lint` runs: dvc.yaml is what the stage table makes, and DVC finds every
    key it reads in the file (no "Parameters '…' are missing" for a key the user never set)."""
    p = _villani("dvc-yaml", "--check", "--params", params)
    assert p.returncode == 0, p.stderr
    assert dvc_yaml.missing_keys(read_yaml(REPO / params)) == []


def test_a_file_lacking_a_key_dvc_reads_is_named_in_one_line_with_the_value_to_add(tmp_path):
    doc = read_yaml(REPO / "params.yaml")
    del doc["model"]["name"], doc["claims"]
    from villani.plan.config import dump_yaml

    dump_yaml(doc, tmp_path / "params.yaml")
    p = _villani("dvc-yaml", "--check", "--params", str(tmp_path / "params.yaml"))
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert "model.name: null" in line and "claims: {" in line and "lacks" in line, line


def test_a_stale_dvc_yaml_is_named(tmp_path):
    stale = tmp_path / "dvc.yaml"
    stale.write_text(dvc_yaml.render().replace("villani rays", "villani rays --extra"))
    p = _villani("dvc-yaml", "--check", "--output", str(stale))
    assert p.returncode == 2 and "run `villani dvc-yaml`" in p.stderr, p.stderr
    assert _villani("dvc-yaml", "--output", str(stale)).returncode == 0
    assert stale.read_text() == (REPO / "dvc.yaml").read_text()
