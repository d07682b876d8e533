"""How many sbatch calls a preset makes through profiles/slurm (villani.dag.submissions):
the count from the plan equals the count in `snakemake -n`'s listing, the paper preset
stays within 300, and docs/slurm.md prints the computed table. No cluster needed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from slurm_helpers import CI_PROFILE, REAL_PROFILE, REPO

from villani.dag import submissions as S
from villani.plan.config import load_params

PRESETS = ["configs/ptb.yaml", "configs/wikitext103.yaml", "configs/paper.yaml"]


@pytest.mark.parametrize("jobs_setting, train, measure", [
    ("{measure: run, train: run}", 3, 3),
    ("{measure: checkpoint, train: segment}", 6, 15),
    ("{measure: checkpoint, train: segment, runs_per_device: 2}\ntrain: {seeds: [0, 1]}", 6, 30),
    ("{measure: run, train: run, runs_per_device: 2}\ntrain: {seeds: [0, 1]}", 3, 6),
])
@pytest.mark.slow  # 52 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_plan_count_equals_snakemakes_dry_run(tmp_path, jobs_setting, train, measure):
    """jobs: one train and one measure job per run (params.yaml's) or per segment and
    checkpoint (the presets'); with two seeds side by side a train job per (update rule, λ)
    — 3 of them — or per its segment."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(f"jobs: {jobs_setting}\n")
    cmd = [sys.executable, "-m", "snakemake", "-n", "--profile", str(REAL_PROFILE), "--profile", str(CI_PROFILE),
           "--configfile", "tests/configs/tiny.yaml", str(jobs)]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    listing = res.stdout + res.stderr
    assert res.returncode == 0, listing[-3000:]
    doc = load_params([str(REPO / "params.yaml"), str(REPO / "tests/configs/tiny.yaml"), str(jobs)])
    assert S.job_counts(doc)["measure"] == measure and S.job_counts(doc)["train"] == train
    assert S.dry_run_stats(listing) == dict(S.job_counts(doc))
    groups, _ = S.profile_grouping(REAL_PROFILE / "config.yaml")
    assert S.dry_run_count(listing, groups) == S.submissions(doc, REAL_PROFILE / "config.yaml")["total"]
    assert "Group job train" in listing and "Group job measure" in listing


def test_paper_preset_is_at_most_300_submissions(monkeypatch):
    monkeypatch.chdir(REPO)
    s = S.submissions(load_params([str(REPO / "configs/paper.yaml")]))
    assert s["total"] <= 300 and s["train"] == 30, s  # 90 runs: 30 (update rule, λ) with their 3 seeds side by side
    assert sum(S.job_counts(load_params([str(REPO / "configs/paper.yaml")])).values()) == 2420


def test_docs_print_the_computed_table(monkeypatch):
    monkeypatch.chdir(REPO)
    assert S.table(PRESETS) in (REPO / "docs" / "slurm.md").read_text()


@pytest.mark.parametrize("bad", ["train=train\n  - rays=train", "rays=rays"])
def test_unknown_grouping_is_refused(tmp_path, bad):
    (tmp_path / "config.yaml").write_text(f"groups:\n  - {bad}\n")
    with pytest.raises(ValueError, match="counted only for a group of train or of measure"):
        S.submissions(load_params([str(REPO / "tests/configs/tiny.yaml")]), tmp_path / "config.yaml")
