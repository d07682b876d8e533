"""The same DAG through real DVC: repro, per-λ status, experiments with -S, metrics diff."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import copy_repo, tiny_params
from tests.workflow.conftest import BIN, env, run, write_params
from villani.dag import dvc_sync
from villani.plan import layout
from villani.plan.runs import runs

pytestmark = pytest.mark.slow


def _git(work, *args):
    return run(["git", *args], cwd=work)


@pytest.fixture(scope="module")
def dvc_repo(tmp_path_factory):
    work = copy_repo(tmp_path_factory.mktemp("dvc"))
    write_params(work / "params.yaml")
    _git(work, "init", "-q")
    assert (work / ".dvc" / "config").exists(), "the repository ships its DVC setup"
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "tiny")
    run([BIN / "dvc", "repro"], cwd=work)
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "repro")
    return work


def _status(work) -> dict:
    return json.loads(run([BIN / "dvc", "status", "--json"], cwd=work).stdout or "{}")


def test_repro_produces_metrics_and_is_then_up_to_date(dvc_repo):
    metrics = json.loads((dvc_repo / "results/metrics/tiny.json").read_text())
    assert "training_adamw_lam0p01_train_loss" in metrics
    assert _status(dvc_repo) == {}


def _plot_specs(work) -> dict:
    """The Vega-Lite spec DVC generates for each plot of dvc.yaml (as `dvc plots show` renders)."""
    out = json.loads(run([BIN / "dvc", "plots", "show", "--json"], cwd=work).stdout)
    assert not out.get("errors"), out["errors"]
    return {Path(k).name: v[0]["content"] for k, v in out["data"].items()}


def test_plots_draw_one_line_per_run_and_colour_scatters_by_lambda(dvc_repo):
    specs = _plot_specs(dvc_repo)
    assert set(specs) == {"training_loss.csv", "psi_vs_ppl.csv", "spectrum.csv", "trace_cv.csv"}
    p = tiny_params()
    n_runs = len(list(runs(p)))
    lines = specs["training_loss.csv"]
    assert lines["mark"]["type"] == "line"
    enc = lines["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"]) == ("step", "loss")
    # a line is drawn per distinct (color, detail) value: per run and revision
    assert enc["color"]["field"] == "group" and {"run", "rev"} <= {d["field"] for d in enc["detail"]}
    rows = lines["data"]["values"]
    per_run: dict = {}
    for r in rows:
        per_run.setdefault(r["run"], []).append(int(float(r["step"])))
    assert len(per_run) == n_runs
    assert all(steps == sorted(set(steps)) for steps in per_run.values())  # no run zig-zags back
    assert len({r["group"] for r in rows}) == len({(r.variant, r.lam) for r in runs(p)})
    for name in ("psi_vs_ppl.csv", "spectrum.csv", "trace_cv.csv"):
        spec = specs[name]
        assert spec["mark"]["type"] == "point" and spec["encoding"]["color"]["field"] == "lam", name
        lams = {r["lam"] for r in spec["data"]["values"]}
        assert lams == {layout.format_lam(x) for x in p["train"]["lambdas"]}, name
        for axis in ("x", "y"):
            field = spec["encoding"][axis]["field"]
            assert all(r[field] not in ("", None) for r in spec["data"]["values"]), (name, field)


def test_metrics_are_flat_numbers_with_dvc_safe_keys(dvc_repo):
    out = json.loads(run([BIN / "dvc", "metrics", "show", "--json"], cwd=dvc_repo).stdout)
    (entry,) = out.values()
    metrics = entry["data"]["results/metrics/tiny.json"]["data"]
    assert metrics and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values())
    assert all("." not in k and "=" not in k for k in metrics)
    assert not any(k.startswith("bounds_adamw_lam0p0_") for k in metrics)  # no bound at λ = 0: left out
    assert metrics["bounds_adamw_lam0p01_n_checkpoints"] == 5
    # the PAC-Bayes ratio only where its hypotheses hold somewhere (bounds.json says why not)
    assert ("bounds_adamw_lam0p01_pac_bayes_final_ratio" in metrics) == (
        metrics["bounds_adamw_lam0p01_pac_bayes_n_applicable"] > 0)


def test_snakemake_has_nothing_to_do_after_dvc_repro(dvc_repo):
    out = run([BIN / "snakemake", "-n", "--cores", "1"], cwd=dvc_repo)
    assert "Nothing to be done" in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]


def test_push_and_pull_through_the_local_remote(dvc_repo):
    run([BIN / "dvc", "push", "-q"], cwd=dvc_repo)
    measured = dvc_repo / "results/runs/tiny/adamw/lam0.01/seed0/measure"
    before = {f.name: f.read_bytes() for f in measured.iterdir()}
    import shutil

    shutil.rmtree(measured)
    shutil.rmtree(dvc_repo / ".dvc" / "cache")
    assert "measure@0.01-0" in _status(dvc_repo)
    run([BIN / "dvc", "pull", "-q"], cwd=dvc_repo)
    assert {f.name: f.read_bytes() for f in measured.iterdir()} == before
    assert _status(dvc_repo) == {}


def test_changing_one_lambda_marks_only_its_stages(dvc_repo):
    write_params(dvc_repo / "params.yaml", train={"lambdas": [0.0, 0.02], "langevin": {"lambdas": [0.02]}})
    try:
        changed = set(_status(dvc_repo))
        assert "train@0.02-0" in changed and "measure@0.02-0" in changed
        assert "train@0.0-0" not in changed and "measure@0.0-0" not in changed
        assert "tokenize" not in changed and "rays" not in changed
    finally:
        _git(dvc_repo, "checkout", "params.yaml")


# --------------------------------------------------------------------------- one tree, two engines at once
# A run is caught mid-job deterministically: once it holds its lock entry and its `villani`
# job is running, its whole process group is stopped (SIGSTOP) while the other engine
# tries, then continued (SIGCONT) and must finish normally.


def _start(cmd, work):
    return subprocess.Popen([str(c) for c in cmd], cwd=work, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_mid_job(proc, work, timeout=300) -> None:
    """Until ``proc`` has an entry in DVC's rwlock and a running `villani` child."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        lock = dvc_sync.holders(work)
        pids = {e["pid"] for e in lock.get("write", {}).values()}
        pids |= {e["pid"] for es in lock.get("read", {}).values() for e in es}
        kids = psutil.Process(proc.pid).children(recursive=True)
        if proc.pid in pids and any("villani" in " ".join(k.cmdline()) for k in kids):
            return
        time.sleep(0.2)
    raise AssertionError("the run never reached its job")


@contextlib.contextmanager
def _paused(proc):
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(proc.pid, signal.SIGCONT)


def _files(folder: Path) -> dict:
    return {str(f.relative_to(folder)): f.stat().st_size for f in folder.rglob("*") if f.is_file()}


def test_dvc_repro_refuses_while_snakemake_runs(dvc_repo):
    data = dvc_repo / "results/data/tiny"
    before = _files(data)
    smk = _start([BIN / "snakemake", "--cores", "1", "--forcerun", "metrics"], dvc_repo)
    try:
        _wait_mid_job(smk, dvc_repo)
        with _paused(smk):
            p = run([BIN / "dvc", "repro"], cwd=dvc_repo, check=False)
        text = p.stdout + p.stderr
        assert p.returncode != 0
        assert f"(PID {smk.pid}): " in text and "snakemake" in text, text[-2000:]
        assert _files(data) == before  # DVC deleted nothing
    finally:
        out = smk.communicate(timeout=600)[0]
    assert smk.returncode == 0, out[-3000:]
    assert _status(dvc_repo) == {}  # the Snakemake run recorded itself in dvc.lock


def test_snakemake_refuses_in_one_line_while_dvc_runs(dvc_repo):
    dvc = _start([BIN / "dvc", "repro", "--force", "--single-item", "metrics"], dvc_repo)
    try:
        _wait_mid_job(dvc, dvc_repo)
        with _paused(dvc):
            p = run([BIN / "snakemake", "--cores", "1", "--forcerun", "metrics"], cwd=dvc_repo, check=False)
        text = p.stdout + p.stderr
        assert p.returncode != 0
        refusal = [line for line in text.splitlines() if "is being written by another process" in line]
        assert len(refusal) == 1 and f"(PID {dvc.pid}): " in refusal[0] and "dvc repro" in refusal[0], text[-3000:]
        assert "rule metrics:" not in text  # no job started
    finally:
        out = dvc.communicate(timeout=600)[0]
    assert dvc.returncode == 0, out[-3000:]
    assert _status(dvc_repo) == {}


def test_experiment_with_set_param_differs(dvc_repo):
    run([BIN / "dvc", "exp", "run", "-n", "bigger-lambda", "-S", "train.lambdas=[0.0,0.02]",
         "-S", "train.langevin.lambdas=[0.02]"], cwd=dvc_repo)
    show = json.loads(run([BIN / "dvc", "exp", "show", "--json"], cwd=dvc_repo).stdout)
    text = json.dumps(show)
    assert "bigger-lambda" in text
    diff = json.loads(run([BIN / "dvc", "metrics", "diff", "--json", "HEAD"], cwd=dvc_repo).stdout)
    entries = diff["results/metrics/tiny.json"]
    # the new λ's headline numbers appear in the diff: new values where HEAD had none
    added = [k for k, v in entries.items() if "lam0p02" in k and v.get("old") is None and v.get("new") is not None]
    assert added, entries
    assert all("." not in k and "=" not in k for k in entries), entries
