"""Issue 45: one notion of "up to date". After every DVC operation — a partial and a
complete pull, `dvc checkout --force`, `dvc exp run`, `dvc exp apply`, `git checkout` of a
version — `dvc status` and `snakemake -n` agree, in a second clone with the real local
remote; a damaged dvc.lock stops `make run` with the command that repairs it. Runs on the
`make run` of test_dvc.py (the session's ``dvc_repo`` fixture) and leaves it as it found it."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.conftest import REPO
from tests.workflow.conftest import BIN, MAKE_RUN, run
from tests.workflow.dvc_flow import README_COMMANDS, agree, dvc_status, git, printed_flow, sh, snakemake_plan

pytestmark = pytest.mark.slow


def test_after_every_dvc_operation_both_engines_agree_in_a_second_clone(dvc_repo):
    """Issue 45 items 1 and 2. The DVC page's flow (and the README's) in its order — `dvc
    push` after the commit, then an experiment and back —: a second clone's `dvc pull`
    restores every output of the committed version. There, after a partial `dvc pull` both engines list the same stages
    to run; after the complete pull (with a `snakemake -n` between the two), `dvc checkout
    --force` of a damaged output, `dvc exp run`, the way back to the committed version,
    `dvc exp apply` and `git checkout` of the version before, both have nothing to do."""
    flow = printed_flow(REPO / "docs" / "running" / "dvc.md")
    order = [flow.index(README_COMMANDS[k]) for k in ("push", "exp_run", "exp_back", "go_back")]
    assert order == sorted(order), flow
    short = printed_flow(REPO / "README.md")
    assert short.index(README_COMMANDS["push"]) < short.index(README_COMMANDS["exp_run"]), short
    for k in ("push", "exp_run", "exp_back"):
        sh(README_COMMANDS[k], dvc_repo)
    agree(dvc_repo)
    clone = dvc_repo.parent / (dvc_repo.name + "-ops")  # beside the first: the same ../dvc-remote
    git(dvc_repo.parent, "clone", "-q", str(dvc_repo), str(clone))
    try:
        sh("dvc pull results/plan/tiny.json", clone)
        left = set(dvc_status(clone))
        assert len(left) > 10 and snakemake_plan(clone) == left, sorted(left ^ snakemake_plan(clone))
        sh(README_COMMANDS["pull"], clone)
        agree(clone)
        (clone / "results/claims/tiny.csv").write_text("damaged by hand\n")
        run([BIN / "dvc", "checkout", "--force"], cwd=clone)
        agree(clone)
        out = sh(README_COMMANDS["exp_run"], clone)  # no run-cache in a clone: claims and metrics run
        (name,) = re.findall(r"Ran experiment\(s\): (\S+)", out.stdout + out.stderr)
        agree(clone)
        sh(README_COMMANDS["exp_back"], clone)
        agree(clone)
        sh(f"dvc exp apply {name}", clone)
        agree(clone)
        git(clone, "commit", "-qam", "claims.confidence = 0.9")
        sh(README_COMMANDS["go_back"], clone)
        agree(clone)
    finally:
        shutil.rmtree(clone)


def test_a_damaged_dvc_lock_stops_make_run_with_the_command_that_repairs_it(dvc_repo):
    """Issue 45 item 6: a truncated dvc.lock with garbage after it, and one left with git's
    merge-conflict markers: `make run` exits non-zero with one line naming dvc.lock and the
    command; that command, run, restores the committed lock, and the next `make run` and
    `dvc status` agree."""
    lock = dvc_repo / "dvc.lock"
    text = lock.read_text()
    damaged = {"truncated": text[: len(text) // 2] + "\ngarbage: [\n",
               "conflict": f"<<<<<<< HEAD\n{text}=======\n{text}>>>>>>> theirs\n"}
    for kind, bad in damaged.items():
        lock.write_text(bad)
        p = run(MAKE_RUN, cwd=dvc_repo, check=False)
        out = p.stdout + p.stderr
        assert p.returncode != 0 and "Nothing to be done" not in out, (kind, out[-3000:])
        (line,) = [x for x in out.splitlines() if x.startswith("dvc.lock: ")]
        cmd = re.search(r"restore it with `([^`]+)`", line).group(1)
        assert cmd == "git checkout HEAD -- dvc.lock", line
        sh(cmd, dvc_repo)
        assert lock.read_text() == text
    out = run(MAKE_RUN, cwd=dvc_repo)
    assert "Nothing to be done" in out.stdout + out.stderr
    agree(dvc_repo)
