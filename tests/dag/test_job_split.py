"""jobs.train / jobs.measure: a job per segment / checkpoint, or per run, and
jobs.runs_per_device: a train job for a λ's seeds side by side — what the train and measure
rules get from villani.dag.targets in each case (no Snakemake; the DAGs themselves:
tests/workflow/test_presets_dry_run.py, tests/slurm/test_submissions.py)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from villani.dag import rules, targets
from villani.plan.config import load_params, resolve
from villani.plan.schedule import checkpoint_steps, segment_ends


@pytest.fixture(scope="module")
def per_run():
    return load_params([REPO / "params.yaml"])  # as shipped: jobs {measure: run, train: run}


@pytest.fixture(scope="module")
def side_by_side():
    return load_params([REPO / "params.yaml", REPO / "configs/ptb.yaml"])  # as shipped: runs_per_device auto, 3 seeds


@pytest.fixture(scope="module")
def per_step(side_by_side):
    """{measure: checkpoint, train: segment}, a train job per run's segment."""
    return resolve({**side_by_side, "jobs": {**side_by_side["jobs"], "runs_per_device": 1}})


RUN = {"dataset": "pydoc", "variant": "adamw", "lam": "0.012", "seed": "1"}


def test_the_shipped_files_split_as_documented(per_run, per_step):
    assert targets.per_run(per_run, "train") and targets.per_run(per_run, "measure")
    assert not targets.per_run(per_step, "train") and not targets.per_run(per_step, "measure")


def test_a_job_per_run_has_every_segment_and_checkpoint_and_runs_all_of_them(per_run):
    ends, steps = segment_ends(per_run["train"]), checkpoint_steps(per_run["train"])
    manifests = targets.job_outputs(per_run, "train", "{root}/runs/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.json")
    assert manifests == [f"results/runs/{{dataset}}/{{variant}}/lam{{lam}}/seed{{seed}}/seg{e:07d}.json" for e in ends]
    assert len(targets.job_outputs(per_run, "measure", "{root}/m/step{step}.json")) == len(steps) == 4
    assert targets.job_log(per_run, "train").endswith("/seed{seed}/all.log")
    assert targets.job_log(per_run, "measure") == "results/logs/measure/{dataset}/{variant}/lam{lam}/seed{seed}/all.log"
    assert targets.job_step(RUN) is None
    for rule in ("train", "measure"):
        assert rules.command(per_run, rule).endswith("--seed {wildcards.seed} --all > {log} 2>&1")
        assert "{params.step}" not in rules.command(per_run, rule)
    assert rules.command(per_run, "train").startswith("exec villani train ")  # a stop signal reaches villani
    assert targets.train_inputs(per_run, RUN) == []  # the job trains the run from its start
    segs = targets.measure_segments(per_run, RUN)
    assert segs == [f"results/runs/pydoc/adamw/lam0.012/seed1/segments/seg{e:07d}.json" for e in ends] and len(segs) == 2


def test_a_job_per_segment_or_checkpoint_keeps_the_step_wildcard(per_step):
    ends = segment_ends(per_step["train"])
    assert targets.job_outputs(per_step, "measure", "{root}/m/step{step}.json") == ["results/m/step{step}.json"]
    assert targets.job_log(per_step, "train") == "results/logs/train/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.log"
    second = {**RUN, "dataset": "ptb", "step": f"{ends[1]:07d}"}
    assert targets.job_step(second) == ends[1]
    # the command and params an earlier version recorded: no params or code trigger re-runs its jobs
    assert rules.command(per_step, "train").endswith("--seed {wildcards.seed} --until {params.step} > {log} 2>&1")
    assert rules.command(per_step, "measure").endswith("--seed {wildcards.seed} --step {params.step} > {log} 2>&1")
    assert targets.train_inputs(per_step, second) == targets.previous_segment(per_step, second) != []
    assert targets.train_inputs(per_step, {**second, "step": f"{ends[0]:07d}"}) == []  # the first segment
    assert targets.measure_segments(per_step, second) == [targets.segment_of_checkpoint(per_step, second)]


def test_seeds_side_by_side_are_a_train_job_per_update_rule_and_lam(side_by_side, per_step):
    """The presets: a train job names the segment of every seed of its (update rule, λ), runs
    them `--per-device 3`, continues from each seed's previous segment; measure is per run."""
    assert targets.side_by_side(side_by_side) == 3 and targets.side_by_side(per_step) == 1
    ends = segment_ends(side_by_side["train"])
    pattern = "{root}/runs/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.json"
    assert targets.job_outputs(side_by_side, "train", pattern) == [
        f"results/runs/{{dataset}}/{{variant}}/lam{{lam}}/seed{s}/seg{{step}}.json" for s in (0, 1, 2)]
    assert targets.job_outputs(side_by_side, "measure", pattern) == ["results/runs/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.json"]
    assert targets.job_log(side_by_side, "train") == "results/logs/train/{dataset}/{variant}/lam{lam}/seeds/seg{step}.log"
    assert rules.command(side_by_side, "train").endswith(
        "--lam {wildcards.lam} --seed 0 1 2 --per-device 3 --until {params.step} > {log} 2>&1")
    job = {key: RUN[key] for key in ("variant", "lam")} | {"dataset": "ptb", "step": f"{ends[1]:07d}"}
    assert targets.train_inputs(side_by_side, job) == [
        f for s in (0, 1, 2) for f in targets.previous_segment(side_by_side, {**job, "seed": s})] != []
    per_run = resolve({**side_by_side, "jobs": {**side_by_side["jobs"], "train": "run"}})
    assert targets.job_outputs(per_run, "train", pattern) == [
        f"results/runs/{{dataset}}/{{variant}}/lam{{lam}}/seed{s}/seg{e:07d}.json" for s in (0, 1, 2) for e in ends]
    assert rules.command(per_run, "train").endswith("--seed 0 1 2 --per-device 3 --all > {log} 2>&1")


def test_switching_the_job_split_changes_no_digest(per_run, per_step):
    """jobs.* is how the work is split, never what is computed: no stage digest reads it."""
    from villani.plan.digest import stage_digest

    flipped = resolve({**per_run, "jobs": {"measure": "checkpoint", "train": "segment"}})
    for stage in ("train", "measure", "rays", "figures", "claims"):
        assert stage_digest(flipped, stage) == stage_digest(per_run, stage), stage
