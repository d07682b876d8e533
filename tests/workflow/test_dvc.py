"""DVC driven as a user drives it, on a clean clone with the committed files: `make run`
(Snakemake) writes dvc.lock and ends with a summary → `dvc status` clean, `dvc repro` and
`snakemake -n` do nothing → edit λ → `dvc repro` reruns what `snakemake -n` would have →
both engines up to date → a commit → `dvc metrics diff HEAD~1`, `dvc plots diff HEAD~1`
show both versions → `dvc push`, a second clone, `dvc pull` → both engines up to date
there; `dvc exp run -S …` twice: the second from DVC's run-cache; a failing stage loses
nothing `dvc checkout` cannot bring back; every preset copied to params.yaml passes `dvc
repro --dry --force`. After every other DVC operation both engines agree:
test_dvc_agreement.py. One workflow run (the session's ``dvc_repo`` fixture, conftest)
serves both files; every test leaves the repository as it found it (HEAD, workspace and
results/)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, copy_repo, tiny_params
from tests.workflow.conftest import BIN, env, git_repo, run
from tests.workflow.dvc_flow import (
    README_COMMANDS,
    dvc_status,
    git,
    nothing_to_do,
    sh,
    snakemake_plan,
    stages_run,
)
from villani.dag import dvc_sync
from villani.plan import layout
from villani.plan.runs import runs

pytestmark = pytest.mark.slow


def _tree(work: Path) -> dict:
    """sha256 of every file under results/ (job logs and runs' work/ state aside: .dvcignore'd)."""
    root = work / "results"
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in root.rglob("*")
            if f.is_file() and f.relative_to(root).parts[0] != "logs" and "work" not in f.relative_to(root).parts}


def test_make_run_shows_progress_and_ends_with_a_summary(dvc_repo):
    """The plan and a progress line per job, no job's input or output list (Snakemake's log
    file keeps them); the last lines say where the figures, tables, ledger and report are,
    what the ledger found (its counts, as results/claims/<dataset>.json has them) and how
    to open them."""
    shown = (dvc_repo / ".make-run.log").read_text()
    lines = shown.splitlines()
    assert not [x for x in lines if x.startswith(("    input:", "    output:", "rule ", "localrule "))], shown[:3000]
    n = len(re.findall(r"^\d+ of (\d+) steps", shown, re.M))
    assert n > 10 and f"{n} of {n} steps (100%) done: all" in lines and len(lines) < n + 60, shown[:3000]
    first_log = sorted((dvc_repo / ".snakemake" / "log").glob("*.snakemake.log"))[0].read_text()
    assert "    input: results/" in first_log and "villani train --threads 1" in first_log
    tail = lines[-12:]
    text = "\n".join(tail)
    counts = json.loads((dvc_repo / "results/claims/tiny.json").read_text())["counts"]
    from villani.dag.summary import format_counts

    assert "figures results/figures/tiny/" in text and "claims ledger results/claims/tiny.csv" in text, text
    assert format_counts(counts) in text and "snakemake --report results/report.html" in text, text
    assert "villani claims-report" in text and "dvc plots show" in text, text


def test_make_run_is_recorded_status_is_clean_and_repro_does_nothing(dvc_repo):
    assert dvc_status(dvc_repo) == {}
    assert sh(README_COMMANDS["status"], dvc_repo).stdout.strip().endswith("Data and pipelines are up to date.")
    before = _tree(dvc_repo)
    out = sh(README_COMMANDS["repro"], dvc_repo)
    assert stages_run(out.stdout + out.stderr) == set(), out.stdout[-3000:]
    assert _tree(dvc_repo) == before
    metrics = json.loads((dvc_repo / "results/metrics/tiny.json").read_text())
    assert metrics["adamw"]["lam0p01"]["val_ppl"] > 0
    nothing_to_do(dvc_repo)


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


def _leaves(d: dict, path=()) -> dict:
    return {k: v for key, x in d.items() for k, v in (_leaves(x, (*path, key)) if isinstance(x, dict)
                                                      else {".".join((*path, key)): x}).items()}


def test_headline_metrics_are_few_nested_numbers_and_the_rest_a_table(dvc_repo):
    """`dvc metrics show`: the ledger's counts and per variant and λ the final perplexity
    and Ψ_s — nested, DVC-safe keys, ≤ 25 numbers —; every other number per variant and λ
    in results/metrics/tiny.csv; the wall-clock beside, untracked."""
    out = json.loads(run([BIN / "dvc", "metrics", "show", "--json"], cwd=dvc_repo).stdout)
    (entry,) = out.values()
    metrics = _leaves(entry["data"]["results/metrics/tiny.json"]["data"])
    assert 0 < len(metrics) <= 25, sorted(metrics)
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values())
    assert all(re.fullmatch(r"[a-z0-9_]+", part) for k in metrics for part in k.split(".")), sorted(metrics)
    groups = {(r.variant, layout.format_lam(r.lam).replace(".", "p")) for r in runs(tiny_params())}
    assert {k for k in metrics if not k.startswith("claims.")} == {
        f"{v}.lam{lam}.{name}" for v, lam in groups for name in ("val_ppl", "psi_s1p0")}
    assert sum(v for k, v in metrics.items() if k.startswith("claims.")) == len(
        json.loads((dvc_repo / "results/claims/tiny.json").read_text())["claims"])
    table = pd.read_csv(dvc_repo / "results/metrics/tiny.csv", dtype={"lam": str}).set_index(["variant", "lam"])
    assert {"train_loss", "theta_sq_norm", "trace_L", "lambda_max", "n_checkpoints"} <= set(table.columns)
    assert pd.isna(table.loc[("adamw", "0.0"), "n_checkpoints"])  # no bound at λ = 0: left empty
    row = table.loc[("adamw", "0.01")]
    assert row["n_checkpoints"] == 5 and row["val_ppl"] == metrics["adamw.lam0p01.val_ppl"]
    # the PAC-Bayes ratio only where its hypotheses hold somewhere (bounds.json says why not)
    assert pd.notna(row["pac_bayes_final_ratio"]) == (row["pac_bayes_n_applicable"] > 0)
    timings = json.loads((dvc_repo / "results/metrics/tiny.timings.json").read_text())
    assert timings["training_adamw_lam0p01_train_seconds"] > 0 and "train_seconds" not in table.columns


def test_files_beside_the_outputs_change_no_stage(dvc_repo):
    """.dvcignore: a TensorBoard event file, an unfinished segment's work/, a job log and an
    atomic-write temporary inside the folders DVC hashes mark no stage changed."""
    run_dir = dvc_repo / "results/runs/tiny/adamw/lam0.0/seed0"
    extra = [run_dir / "tensorboard/events.out.tfevents.1.host", run_dir / "work/seg0000012.csv",
             dvc_repo / "results/bounds/tiny/.bounds.csv.0123456789ab.tmp", run_dir / "ckpt/train.log"]
    try:
        for f in extra:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text("x")
        assert dvc_status(dvc_repo) == {}
    finally:
        for f in extra:
            f.unlink()
        (run_dir / "tensorboard").rmdir()  # work/ holds the finished segments' copies (work/done/) too


def _set(work: Path, old: str, new: str) -> None:
    """Edit params.yaml as a user does: one value, the rest of the text unchanged."""
    text = (work / "params.yaml").read_text()
    assert text.count(old) == 1, old
    (work / "params.yaml").write_text(text.replace(old, new))


def test_a_failing_stage_loses_nothing_under_repro_and_exp_run(dvc_repo):
    """A measurement set larger than the train split passes the schema but stops
    `villani measure` (the first stage it changes). DVC removes a stage's outputs before
    it runs it; the recorded version stays in the cache: after `dvc repro` and after `dvc
    exp run -S`, `dvc checkout` brings every file of results/ back, byte for byte."""
    before = _tree(dvc_repo)
    _set(dvc_repo, "  blocks: 8\n", "  blocks: 100000\n")
    try:
        p = sh("dvc repro", dvc_repo, check=False)
        assert p.returncode != 0 and "measure.blocks" in p.stdout + p.stderr, (p.stdout + p.stderr)[-3000:]
    finally:
        git(dvc_repo, "checkout", "params.yaml")
    run([BIN / "dvc", "checkout"], cwd=dvc_repo)
    assert _tree(dvc_repo) == before
    p = sh("dvc exp run -S 'measure.blocks=100000'", dvc_repo, check=False)
    assert p.returncode != 0 and "measure.blocks" in p.stdout + p.stderr, (p.stdout + p.stderr)[-3000:]
    git(dvc_repo, "checkout", "params.yaml", "dvc.lock")  # a failed experiment leaves its -S values there
    run([BIN / "dvc", "checkout"], cwd=dvc_repo)
    assert _tree(dvc_repo) == before
    assert dvc_status(dvc_repo) == {}


def _edit(work: Path, values: dict) -> None:
    """Edit params.yaml as a user does: these values, the rest of the file as it was."""
    from ruamel.yaml import YAML

    from tests.workflow.conftest import _write_over

    yaml = YAML()
    doc = yaml.load((work / "params.yaml").read_text())
    _write_over(doc, values)
    with open(work / "params.yaml", "w") as f:
        yaml.dump(doc, f)


def _lams(metrics: dict) -> set[str]:
    return set(metrics["adamw"])


def test_a_lambda_edit_travels_through_both_engines_a_commit_and_a_clone(dvc_repo):
    """λ = 0.01 → 0.02 (trained and surveyed): `dvc repro` runs exactly what `snakemake -n`
    would have; both engines then have nothing to do; the dropped λ's files enter no hash
    (moved to results/retired/); a commit, and both versions side by side; `dvc push`, a
    second clone, `dvc pull`: both engines up to date there; back to the first version."""
    _edit(dvc_repo, {"train": {"lambdas": [0.0, 0.02], "langevin": {"lambdas": [0.02]}},
                     "landscape": {"lambdas": [0.0, 0.02]}})
    smk = snakemake_plan(dvc_repo)
    out = sh(README_COMMANDS["repro"], dvc_repo)
    ran = stages_run(out.stdout)
    assert ran == smk, (sorted(ran - smk), sorted(smk - ran))
    assert {"plan", "train@0.02-0", "measure@0.02-0", "train_langevin@0.02-0", "landscape@0.02", "metrics"} <= ran
    assert not ran & {"fetch", "tokenize", "rays", "cost", "train@0.0-0", "landscape@0.0"}, ran
    assert (dvc_repo / "results/retired/tiny/runs/adamw/lam0.01/seed0/segments").is_dir()
    assert dvc_status(dvc_repo) == {}
    nothing_to_do(dvc_repo)
    git(dvc_repo, "commit", "-qam", "λ = 0.02")
    try:
        diff = json.loads(sh(README_COMMANDS["metrics_diff"] + " --json", dvc_repo).stdout)
        entries = diff["results/metrics/tiny.json"]
        assert any("lam0p02" in k and v.get("old") is None and v.get("new") is not None for k, v in entries.items())
        assert any("lam0p01" in k and v.get("new") is None and v.get("old") is not None for k, v in entries.items()
                   if k.startswith("adamw."))
        plots = json.loads(sh(README_COMMANDS["plots_diff"] + " --json", dvc_repo).stdout)
        assert not plots.get("errors"), plots["errors"]
        for name, spec in plots["data"].items():
            assert {r["rev"] for r in spec[0]["content"]["data"]["values"]} == {"HEAD~1", "workspace"}, name
        assert "index.html" in sh(README_COMMANDS["plots_diff"], dvc_repo).stdout
        sh(README_COMMANDS["push"], dvc_repo)
        clone = dvc_repo.parent / (dvc_repo.name + "-clone")  # beside the first: the same ../dvc-remote
        git(dvc_repo.parent, "clone", "-q", str(dvc_repo), str(clone))
        try:
            sh(README_COMMANDS["pull"], clone)
            ours = {k: v for k, v in _tree(dvc_repo).items()
                    if not k.startswith(("retired/", "metrics/tiny.timings", ".villani.lock"))}
            assert _tree(clone) == ours, sorted(set(ours) ^ set(_tree(clone)))[:20]
            assert dvc_status(clone) == {}
            nothing_to_do(clone)
        finally:
            shutil.rmtree(clone)
    finally:
        sh(README_COMMANDS["go_back"], dvc_repo)
        git(dvc_repo, "commit", "-qam", "back to λ = 0.01")
    assert dvc_status(dvc_repo) == {}
    assert _lams(json.loads((dvc_repo / "results/metrics/tiny.json").read_text())) == {"lam0p0", "lam0p01"}
    nothing_to_do(dvc_repo)


def _comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def test_an_experiment_tried_twice_comes_from_the_run_cache(dvc_repo):
    """The experiment, back to the baseline, the same experiment again: its stages come
    from DVC's run-cache, none runs. `dvc exp run -S` rewrites params.yaml in DVC's YAML
    style: the values (one changed) and the comments stay, as docs/running/dvc.md says."""
    before = (dvc_repo / "params.yaml").read_text()
    out = sh(README_COMMANDS["exp_run"], dvc_repo)
    assert stages_run(out.stdout) == {"claims", "metrics"}, out.stdout[-3000:]
    try:
        after = (dvc_repo / "params.yaml").read_text()
        want = yaml.safe_load(before)
        want["claims"]["confidence"] = 0.9
        assert yaml.safe_load(after) == want and _comments(after) == _comments(before)
        git(dvc_repo, "checkout", "params.yaml", "dvc.lock")
        run([BIN / "dvc", "checkout", "--force"], cwd=dvc_repo)
        again = sh(README_COMMANDS["exp_run"], dvc_repo)
        assert stages_run(again.stdout) == set(), again.stdout[-3000:]  # both restored from the run-cache
        assert "is cached" in again.stdout + again.stderr
        show = json.loads(run([BIN / "dvc", "exp", "show", "--json"], cwd=dvc_repo).stdout)
        baseline = next(e for e in show if e.get("experiments"))
        exps = [e for x in baseline["experiments"] for e in x["revs"]]
        assert len(exps) == 2, show
        for rev in (baseline, *exps):
            assert rev["data"]["metrics"]["results/metrics/tiny.json"]["data"], rev  # in the cache, not `!`
        text = sh(README_COMMANDS["exp_show"], dvc_repo).stdout
        assert "claims.confidence" in text and "0.9" in text and "…" not in text, text[-3000:]
    finally:
        git(dvc_repo, "checkout", "params.yaml", "dvc.lock")
        run([BIN / "dvc", "checkout", "--force"], cwd=dvc_repo)
    assert dvc_status(dvc_repo) == {}


@pytest.mark.parametrize("preset", ["params.yaml", "configs/laptop.yaml", "configs/ptb.yaml",
                                    "configs/rehearsal.yaml", "configs/wikitext103.yaml"])
def test_every_shipped_parameter_file_as_params_yaml_passes_dvc_repro_dry_on_a_fresh_clone(preset, tmp_path):
    """`dvc repro --dry --force` with no results/ and no start-up patch: every stage listed,
    none failing on an input an earlier stage has yet to write (DVC skips its run-cache
    lookup under --force); no .pth file in the environment."""
    import sysconfig

    assert not list(Path(sysconfig.get_paths()["purelib"]).glob("villani_*.pth"))
    work = git_repo(copy_repo(tmp_path))
    cmd = README_COMMANDS["preset"].replace("configs/ptb.yaml", preset)
    out = sh(cmd if preset != "params.yaml" else "dvc repro --dry --force", work)
    assert not (work / "results").exists(), "a dry run wrote results/"
    ran = stages_run(out.stdout)
    assert {"fetch", "plan", "tokenize", "rays", "metrics", "paper"} <= ran and any(s.startswith("train@") for s in ran), (
        out.stdout[-2000:])


def test_the_documentation_prints_these_dvc_commands_and_no_other():
    page = (REPO / "docs" / "running" / "dvc.md").read_text()
    assert not [c for c in README_COMMANDS.values() if c not in page]
    readme = [line.split("#")[0].strip() for line in (REPO / "README.md").read_text().splitlines()
              if line.startswith("dvc ")]
    assert readme and not [c for c in readme if c not in README_COMMANDS.values()], "README: a DVC line no test runs"


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
    assert dvc_status(dvc_repo) == {}  # the Snakemake run recorded itself in dvc.lock


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
    assert dvc_status(dvc_repo) == {}


def test_an_edited_training_parameter_retrains_under_dvc_repro(dvc_repo):
    """Edit train.lr in the shipped params.yaml, `dvc repro` (issue 40 item 1): `villani train
    --all` trains every AdamW run again (a segment is done only under the parameters asked
    now, whatever files are left: tests/hardening/test_segment_done.py), the runs are
    measured again, and every measure JSON, checkpoint and the claims ledger are of the new
    lr. Back to the committed version after."""
    from villani.plan.schedule import checkpoint_steps

    _set(dvc_repo, "  lr: 0.01\n", "  lr: 0.012\n")
    try:
        out = sh(README_COMMANDS["repro"], dvc_repo)
        ran = stages_run(out.stdout)
        assert {"train@0.0-0", "train@0.01-0", "measure@0.0-0", "measure@0.01-0", "bounds", "claims",
                "metrics"} <= ran, ran
        assert out.stdout.count("segment 0→12: trained;") == 2, out.stdout[-3000:]
        p = tiny_params(train={"lr": 0.012})
        root = dvc_repo / "results"
        hashes = {}
        for r in runs(p, ("adamw",)):
            for step in checkpoint_steps(p["train"]):
                meta = json.loads(r.path(layout.CKPT_META, root, step=step).read_text())
                rec = json.loads(r.path(layout.MEASURE_JSON, root, step=step).read_text())
                assert meta["train_params"]["train.lr"] == rec["train_params"]["train.lr"] == 0.012
                assert rec["weights_sha256"] == meta["weights_sha256"]
                hashes[r.path(layout.MEASURE_JSON, root, step=step).relative_to(root).as_posix()] = \
                    rec["record_sha256"]
        ledger = json.loads(layout.fmt(layout.CLAIMS_JSON, root, dataset="tiny").read_text())
        assert {k: v for k, v in ledger["inputs"]["measurements"].items() if k in hashes} == hashes
    finally:
        git(dvc_repo, "checkout", "params.yaml", "dvc.lock")
        run([BIN / "dvc", "checkout", "--force"], cwd=dvc_repo)
    assert dvc_status(dvc_repo) == {}
