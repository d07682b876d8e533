"""The whole default DAG through real Snakemake: every output, no-op rerun, per-λ reruns."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import tiny_params
from tests.workflow.conftest import BIN, run
from villani.dag import dvc_sync, targets

pytestmark = pytest.mark.slow


def test_every_output_exists_and_is_not_empty(snakemake_done):
    p = tiny_params()
    expected = targets.all_outputs(p) + targets.figure_inputs(p) + [targets.fetch_record(p)]
    assert set(targets.metrics_outputs(p)) <= set(expected) and targets.paper_outputs(p)[0] in expected
    for f in expected:
        path = snakemake_done / f
        assert path.exists(), f
        assert path.stat().st_size > 0, f
    metrics = json.loads((snakemake_done / "results/metrics/tiny.json").read_text())
    assert metrics["claims"] and all(isinstance(v, int) for v in metrics["claims"].values())
    assert all(isinstance(v, float) for lam in metrics["adamw"].values() for v in lam.values())
    assert (snakemake_done / "results/figures/tiny/fig5_training_curves.png").exists()


def test_dvc_has_nothing_to_do_after_a_snakemake_run(snakemake_done):
    """The run recorded its outputs in dvc.lock (onsuccess, villani.dag.dvc_sync.record)."""
    assert (snakemake_done / "dvc.lock").exists()
    out = run([BIN / "dvc", "status", "--json"], cwd=snakemake_done)
    assert json.loads(out.stdout or "{}") == {}, out.stdout[-3000:]
    assert dvc_sync.holders(snakemake_done).get("write", {}) == {}  # the run's claim is gone


def test_second_invocation_is_a_no_op(snakemake_done):
    out = run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
               "--cores", "2", "-n"], cwd=snakemake_done)
    assert "Nothing to be done" in out.stdout + out.stderr


def test_changing_one_lambda_reruns_only_its_branch(snakemake_done):
    cfg = snakemake_done / "one-lambda.yaml"
    cfg.write_text("train:\n  lambdas: [0.0, 0.02]\n  langevin: {lambdas: [0.02]}\n")
    out = run([BIN / "snakemake", "--configfile", "tests/configs/tiny.yaml", str(cfg), "--cores", "2", "-n", "-p"],
              cwd=snakemake_done)
    text = out.stdout + out.stderr
    cmds = [m.group(0) for m in re.finditer(r"villani (\w+) [^\n]*", text)]
    per_run = [c for c in cmds if c.split()[1] in ("train", "measure")]
    assert per_run, text[-3000:]
    assert all("--lam 0.02 " in c + " " for c in per_run), per_run
    assert not any(c.split()[1] in ("tokenize", "rays") for c in cmds), cmds


def test_report_has_a_description_and_one_entry_per_figure(snakemake_done):
    from villani.figures import REGISTRY

    run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
         "--report", "results/report.html"], cwd=snakemake_done)
    html = (snakemake_done / "results/report.html").read_text(errors="replace")
    assert "fig5_training_curves" in html
    # the report's data: one result per figure (its PNG) and per table, none for PDF/CSV twins
    entries = set(re.findall(r'"(?:target|name)":\s*"([^"]+\.(?:png|pdf|csv))"', html))
    figures = {n for n, e in REGISTRY.items() if e.kind == "figure"}
    assert {f"{n}.png" for n in figures} <= entries, sorted(entries)
    assert not {f"{n}.csv" for n in figures} & entries and not {f"{n}.pdf" for n in figures} & entries
    # the description, with links to each figure's other files
    # the description of this run (villani.report.description), from its parameters
    desc = json.loads(re.search(r"var workflow_desc = (\".*\");", html).group(1))
    assert 'This run, from <tt class="docutils literal">params.yaml</tt> + <tt class="docutils literal">tests/configs/tiny.yaml' in desc
    assert "System Message" not in desc  # valid reStructuredText
    assert "λ ∈ {0.0, 0.01}" in desc and "results/claims/tiny.csv" in desc
    assert "GPT-Neo language models" not in desc and "noise-injection" not in desc
    assert "figures/tiny/fig5_training_curves.csv" in html


def test_bad_params_stop_snakemake_before_any_job(snakemake_done):
    bad = snakemake_done / "bad.yaml"
    bad.write_text("measure:\n  s_values: [0.0]\n")
    out = run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml", str(bad),
               "--cores", "2"], cwd=snakemake_done, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "measure.s_values[0]: 0.0 is invalid (allowed: number > 0)" in text, text[-2000:]
    assert not any(f"rule {r}:" in text for r in ("tokenize", "train", "measure")), text[-2000:]


def test_new_file_times_alone_trigger_no_work(snakemake_done):
    """What `dvc checkout`/`dvc pull` do to a results tree: same content, new mtimes in any order."""
    import os
    import random

    files = [f for f in (snakemake_done / "results").rglob("*") if f.is_file()]
    random.Random(0).shuffle(files)
    now = os.stat(snakemake_done / "params.yaml").st_mtime + 1000
    for i, f in enumerate(files):
        os.utime(f, (now + i, now + i))
    out = run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
               "--cores", "2", "-n"], cwd=snakemake_done)
    assert "Nothing to be done" in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]


def test_prune_frees_measured_checkpoints_without_triggering_work(snakemake_done):
    from villani.plan.schedule import checkpoint_steps, segment_ends

    p = tiny_params()
    out = run([BIN / "villani", "prune", "--params", "params.yaml", "--params", "tests/configs/tiny.yaml"],
              cwd=snakemake_done)
    assert "freed" in out.stdout
    ckpt = snakemake_done / "results/runs/tiny/adamw/lam0.01/seed0/ckpt"
    kept = {int(f.parent.name[4:11]) for f in ckpt.glob("step*/model.safetensors")}
    assert set(segment_ends(p["train"])) <= kept
    assert kept < set(checkpoint_steps(p["train"]))  # something was pruned
    assert len(list(ckpt.glob("step*/checkpoint.json"))) == len(checkpoint_steps(p["train"]))  # metadata always kept
    dry = run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
               "--cores", "2", "-n"], cwd=snakemake_done)
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_dvc_plots_and_the_report_render_offline(snakemake_done, tmp_path):
    """Issue 26: `dvc plots show` and `snakemake --report` of this run are drawn completely
    by headless Chromium with networking cut off (checks: tests/report/pages.py)."""
    import yaml

    from tests.report import pages

    exe = pages.chromium_or_skip()
    pages.install_plots_page(snakemake_done)  # make install's step, from this checkout's npm packages
    page = pages.dvc_plots_show(snakemake_done, run)
    n_plots = len(yaml.safe_load((snakemake_done / "dvc.yaml").read_text())["plots"])
    report = snakemake_done / "results/report-offline.html"
    run([BIN / "snakemake", "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
         "--report", report.relative_to(snakemake_done)], cwd=snakemake_done)
    with pages.Browser(exe) as b:
        marks = pages.check_vega_page(b, page, n_plots, tmp_path / "dvc-plots.png")
        images = pages.check_report(b, report, tmp_path, description="This run, from")
    assert len(marks) == n_plots
    assert any(p.endswith("fig5_training_curves.png") for p, _, _ in images), images
