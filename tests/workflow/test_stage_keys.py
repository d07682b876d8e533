"""DVC and Snakemake re-run a stage on the same parameters: each DVC stage's ``params:``
covers exactly the keys of the Snakemake digest of that stage (:func:`stage_keys`)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import REPO, tiny_params
from villani.plan.digest import STAGES, stage_inputs

DVC_STAGE = {f"{stage}{suffix}": (stage, variant) for stage in ("train", "measure")
             for suffix, variant in (("_lr", "adamw_lr0.001"), ("_wu", "adamw_wu3"), ("_adamw_noise", "adamw_noise"),
                                     ("_adam_l2", "adam_l2"), ("_langevin", "langevin"))}


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


@pytest.mark.parametrize("name", list(_dvc_stages()))
def test_dvc_params_are_the_snakemake_digest_keys(name):
    p = tiny_params()
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
