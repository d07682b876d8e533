"""villani.dag.dvc_sync on real files with DVC's own rwlock code (the engines themselves
are exercised in tests/workflow: test_dvc.py, test_snakemake.py)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import villani
from villani.dag import dvc_sync, workspace_state


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


def test_dvc_write_lock_is_the_one_use_of_dvcs_private_rwlock(project):
    """The private ``dvc.rwlock`` is called from one function: it enters and leaves an entry
    of this process, and names a live overlapping holder."""
    tmp = project / ".dvc" / "tmp"
    tmp.mkdir()
    leave = dvc_sync.dvc_write_lock(tmp, project / "results", "snakemake -n", False)
    assert dvc_sync.holders(project)["write"] == {str(project / "results"): {"pid": os.getpid(), "cmd": "snakemake -n"}}
    leave()
    leave()  # a second leave (or an entry removed by hand) is harmless
    assert not dvc_sync.holders(project).get("write")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp / "rwlock").write_text(json.dumps({"write": {str(project / "results/x"): {"pid": holder.pid,
                                                                                       "cmd": "dvc repro"}}}))
        with pytest.raises(dvc_sync.TreeBusy, match=rf"^\(PID {holder.pid}\): dvc repro$"):
            dvc_sync.dvc_write_lock(tmp, project / "results", "snakemake", False)
    finally:
        holder.kill()
        holder.wait()
    users = []  # every import of dvc.rwlock in the package, by the function around it
    for f in Path(villani.__file__).parent.rglob("*.py"):
        tree = ast.parse(f.read_text())
        funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "dvc.rwlock" or n.startswith("dvc.rwlock.") for n in names):
                around = [fn.name for fn in funcs if fn.lineno <= node.lineno <= fn.end_lineno]
                users.append(f"{f.name}:{around[-1] if around else '<module>'}")
    assert users == ["dvc_sync.py:dvc_write_lock"]


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


# --------------------------------------------------------------------------- the state both engines agree on
LOCK = """schema: '2.0'
stages:
  s:
    cmd: echo
    outs:
    - path: out.txt
      hash: md5
      md5: 0cc175b9c0f1b6a831c399e269772661
      size: 1
    - path: folder
      hash: md5
      md5: 0cc175b9c0f1b6a831c399e269772661.dir
      size: 1
      nfiles: 1
"""


def _outs(project):
    (project / "dvc.lock").write_text(LOCK)
    (project / "out.txt").write_text("a")
    (project / "folder").mkdir()
    (project / "folder" / "f.txt").write_text("a")


def test_the_state_changes_with_any_output_or_the_lock_and_with_nothing_else(project):
    """A pull, a checkout or an edit rewrites an output (new mtime or inode), removes one or
    adds one to a folder; a git checkout changes the lock: each changes the digest. Editing
    params.yaml or a file outside the outputs does not."""
    _outs(project)
    s0 = workspace_state.state(project)
    (project / "params.yaml").write_text("x: 1\n")
    (project / "elsewhere.txt").write_text("b")
    assert workspace_state.state(project) == s0
    changes = [lambda: os.utime(project / "out.txt", ns=(1, 1)),
               lambda: (project / "folder" / "new.txt").write_text("n"),
               lambda: (project / "out.txt").unlink(),
               lambda: (project / "dvc.lock").write_text(LOCK.replace("size: 1\n", "size: 2\n", 1))]
    seen = {s0}
    for change in changes:
        change()
        now = workspace_state.state(project)
        assert now not in seen
        seen.add(now)
    workspace_state.remember(project)
    assert workspace_state.seen(workspace_state.state(project), project)
    (project / "out.txt").write_text("a")
    assert not workspace_state.seen(workspace_state.state(project), project)


@pytest.mark.parametrize("damage", ["truncated", "conflict"])
@pytest.mark.parametrize("committed", [True, False])
def test_an_unreadable_lock_is_one_line_whose_command_repairs_it(project, damage, committed):
    """A truncated dvc.lock with garbage after it, or one left with merge-conflict markers:
    one line naming the file and the command; the command, run, gives a lock that reads
    (the committed one) or none (a run then writes it)."""
    _outs(project)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    if committed:
        subprocess.run(["git", "add", "dvc.lock"], cwd=project, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock"], cwd=project,
                       check=True)
    bad = (LOCK[: len(LOCK) // 2] + "\ngarbage: [\n" if damage == "truncated"
           else f"<<<<<<< HEAD\n{LOCK}=======\n{LOCK}>>>>>>> other\n")
    (project / "dvc.lock").write_text(bad)
    with pytest.raises(workspace_state.LockInvalid) as e:
        workspace_state.read_lock(project)
    line = str(e.value)
    assert "\n" not in line and line.startswith("dvc.lock: "), line
    assert ("merge-conflict" if damage == "conflict" else "not valid YAML") in line, line
    cmd = re.search(r"restore it with `([^`]+)`", line).group(1)
    assert cmd == ("git checkout HEAD -- dvc.lock" if committed else "rm dvc.lock"), line
    subprocess.run(["bash", "-c", cmd], cwd=project, check=True)
    assert (workspace_state.read_lock(project) is not None) == committed


def test_a_lock_that_dvcs_schema_refuses_stops_the_sync_in_one_line(project):
    """Valid YAML that DVC's lock schema refuses (a key it does not know): `dvc status`
    fails, and the sync turns DVC's words into the one line with the repair."""
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "dvc.yaml").write_text("stages:\n  s:\n    cmd: echo\n    outs: [out.txt, folder]\n")
    _outs(project)
    (project / "results").mkdir()
    (project / "dvc.lock").write_text(LOCK.replace("    cmd: echo\n", "    cmd: echo\n    bogus: 1\n"))
    with pytest.raises(workspace_state.LockInvalid) as e:
        dvc_sync.sync("Snakefile", project)
    line = str(e.value)
    assert "\n" not in line and line.startswith("dvc.lock: refused by DVC (") and "bogus" in line, line
    assert "restore it with `rm dvc.lock`" in line, line


def test_the_touch_executors_pause_is_the_attribute_the_sync_sets():
    """The sync runs Snakemake's --touch without its touch executor's 0.1 s pause per job
    (villani.dag.dvc_sync._TOUCH sets Executor.SLEEPING_TIME); a Snakemake that renames the
    attribute would leave the pause in place unnoticed but for this test."""
    from snakemake.executors import touch

    assert touch.Executor.SLEEPING_TIME == 0.1
    assert "touch.Executor.SLEEPING_TIME = 0.0" in dvc_sync._TOUCH
