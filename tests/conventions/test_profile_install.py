"""`villani profile install` puts profiles/slurm where `snakemake --profile NAME` finds it,
never over a profile the user has, with the USER: lines filled from the options."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, copy_repo
from villani.cli import main
from villani.dag.profiles import fill_user_lines, gpu_partition_resources
from villani.plan.stages import TABLE

SLURM = REPO / "profiles" / "slurm" / "config.yaml"


def test_fill_user_lines_uncomments_only_what_was_given():
    text = SLURM.read_text()
    assert fill_user_lines(text) == text
    filled = yaml.safe_load(fill_user_lines(text, account="proj42", partition="cpu"))
    assert filled["default-resources"]["slurm_account"] == "proj42"
    assert filled["default-resources"]["slurm_partition"] == "cpu"
    assert "set-resources" not in filled  # the profile holds what every rule shares; the rules, their rows
    with pytest.raises(ValueError, match="slurm_account: 'a b' is not a SLURM name"):
        fill_user_lines(text, account="a b")


def test_the_gpu_partition_goes_to_every_gpu_stage_of_the_table():
    entries = yaml.safe_load(SLURM.read_text() + gpu_partition_resources("a100q"))["set-resources"]
    assert entries == {row.name: {"slurm_partition": "a100q"} for row in TABLE if row.gpu}
    assert set(entries) == {"train", "measure", "rays", "landscape", "cost"}
    with pytest.raises(ValueError, match="--gpu-partition: 'a b' is not a SLURM name"):
        gpu_partition_resources("a b")


@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_install_never_overwrites_and_snakemake_finds_it(tmp_path, monkeypatch, capsys):
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    mine = xdg / "snakemake" / "slurm" / "config.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("executor: slurm\njobs: 1\n")  # the user's own profile
    work = copy_repo(tmp_path / "repo")
    monkeypatch.chdir(work)
    assert main(["profile", "install", "--account", "proj42", "--gpu-partition", "a100q"]) == 0
    out = capsys.readouterr().out
    assert "installed profile 'slurm-villani' ('slurm' exists and was left alone)" in out, out
    assert mine.read_text() == "executor: slurm\njobs: 1\n"
    installed = xdg / "snakemake" / "slurm-villani" / "config.yaml"
    assert yaml.safe_load(installed.read_text())["default-resources"]["slurm_account"] == "proj42"
    # the command a cluster user types, by name, from the repository
    env = dict(os.environ, XDG_CONFIG_HOME=str(xdg), PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    p = subprocess.run([Path(sys.executable).parent / "snakemake", "--profile", "slurm-villani", "-n",
                        "--configfile", "tests/configs/tiny.yaml"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=600)
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-3000:]
    assert "slurm_account=proj42" in text and "slurm_partition=a100q" in text, text[-3000:]
    assert "gres=gpu:1" in text  # a GPU stage's request, from its row


def test_missing_source_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "install"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("villani: error: profiles/slurm/config.yaml: profile not found "
                   "(run from the repository root, or pass --source DIR)")
    assert not (tmp_path / "xdg").exists()
