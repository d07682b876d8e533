"""villani.dag.dvc_sync on real files with DVC's own rwlock code (the engines themselves
are exercised in tests/workflow: test_dvc.py, test_snakemake.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from villani.dag import dvc_sync


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("")
    return tmp_path


def test_no_dvc_project_no_claim(tmp_path):
    assert dvc_sync.claim(tmp_path) is None
    dvc_sync.release(None)


def test_claim_is_an_entry_of_this_process_until_released(project):
    c = dvc_sync.claim(project, cmd="snakemake --cores 1")
    entry = dvc_sync.holders(project)["write"][str(project / "results")]
    assert entry == {"pid": os.getpid(), "cmd": "snakemake --cores 1"}
    dvc_sync.release(c)
    assert not dvc_sync.holders(project).get("write")


def test_a_live_holder_is_refused_in_one_line_and_kept(project):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock = {"read": {str(project / "results/data/tiny"): [{"pid": holder.pid, "cmd": "dvc repro"}]}}
        (project / ".dvc" / "tmp").mkdir()
        (project / ".dvc" / "tmp" / "rwlock").write_text(json.dumps(lock))
        with pytest.raises(dvc_sync.TreeBusy) as e:
            dvc_sync.claim(project, cmd="snakemake")
        assert str(e.value) == (f"results/ is being written by another process ((PID {holder.pid}): dvc repro); "
                                "start again when it has finished")
        assert dvc_sync.holders(project) == lock  # never unlocked under a live process
    finally:
        holder.kill()
        holder.wait()
    # once the holder is gone, its entry is stale: dropped, and the claim succeeds
    c = dvc_sync.claim(project, cmd="snakemake")
    assert not dvc_sync.holders(project).get("read")
    dvc_sync.release(c)


def test_only_a_run_of_params_yaml_alone_is_recorded(tmp_path):
    assert dvc_sync.is_committed_params(["params.yaml"], None, tmp_path)
    assert dvc_sync.is_committed_params(["params.yaml", str(tmp_path / "params.yaml")], {}, tmp_path)
    assert not dvc_sync.is_committed_params(["params.yaml", "tests/configs/tiny.yaml"], None, tmp_path)
    assert not dvc_sync.is_committed_params(["params.yaml"], {"train": {"lr": 0.1}}, tmp_path)
    assert dvc_sync.record(tmp_path) == "dvc.lock: no DVC project here, nothing recorded"


def test_a_failed_dvc_commit_prints_dvcs_own_reason(project):
    """`make run` ends with `dvc commit --force`; when DVC refuses, its own reason is shown."""
    (project / "params.yaml").write_text("data: {name: tiny}\n")
    (project / "dvc.yaml").write_text("stages:\n  s:\n    cmd: echo\n    params: [model.name]\n"
                                      "    outs: [out.txt]\n")
    (project / "out.txt").write_text("x")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    line = dvc_sync.record(project)
    assert line.startswith("dvc.lock not updated: `dvc commit --force` failed: "), line
    assert "model.name" in line and "missing" in line, line
