"""Static checks of the SLURM profiles (no cluster needed, so not marked `slurm`)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from slurm_helpers import CI_PROFILE, REAL_PROFILE, REPO

GPU_RULES = {"train", "measure", "rays", "landscape", "cost"}
CPU_RULES = {"tokenize", "bounds", "figures", "claims", "metrics", "paper"}
LOCAL_RULES = {"fetch", "pretrained", "plan"}  # localrules: run by snakemake itself on the submit host
WORK_RULES = {"train", "measure"}  # runtime and mem_mb from their work: villani.dag.resources
# flags the plugin sets itself and rejects inside slurm_extra
FORBIDDEN_EXTRA = re.compile(r"--(gres|gpus|mem|cpus-per|partition|account|time|qos|nodes|ntasks)\b|(^|\s)-[pAtNnc]\b")


def load(profile):
    return yaml.safe_load((profile / "config.yaml").read_text())


def evaluate(value, attempt):
    """A resource value as snakemake evaluates it from a profile (expressions over attempt)."""
    from snakemake.resources import Resource

    if isinstance(value, int):
        return value
    return Resource.cli_evaluator("x", str(value), wildcards={}, input=[], attempt=attempt, async_run=None)


def test_the_default_profile_sets_the_rerun_triggers_alone():
    """profiles/default/ next to the Snakefile is loaded with every --profile and wins over
    it: it holds the one setting every run must share (what reruns a job, the same as DVC's
    view), and nothing a site profile sets."""
    assert load(REPO / "profiles" / "default") == {"rerun-triggers": ["input", "params", "code", "software-env"]}
    assert not (REPO / "workflow" / "profiles" / "default").exists()
    for profile in (REPO / "profiles" / "local", REAL_PROFILE):
        assert "rerun-triggers" not in load(profile)


def test_real_profile_shape():
    """profiles/slurm holds what every rule shares; what a rule asks for is its row's."""
    p = load(REAL_PROFILE)
    assert p["executor"] == "slurm"
    assert p["retries"] >= 1 and p["rerun-incomplete"] is True
    assert p["slurm-logdir"] == "logs/slurm"
    assert "cpus_per_task" not in p["default-resources"], "would override cpus_per_gpu on GPU rules"
    assert not {"set-resources", "set-threads"} & set(p), "per-rule requests are the stage rows'"
    assert not {"runtime", "mem_mb", "gres"} & set(p["default-resources"])
    # site values are left to the user (commented), never guessed
    assert "slurm_account" not in p["default-resources"]
    text = (REAL_PROFILE / "config.yaml").read_text()
    assert re.search(r"#\s*slurm_account:.*USER", text) and re.search(r"#\s*slurm_partition:.*USER", text)
    assert "villani.workflow_support" not in text


def _row_resources(name, attempt):
    from villani.dag.rules import resources
    from villani.plan.config import dataset_params, load_params
    from villani.plan.schedule import segment_ends
    from villani.plan.stages import stage

    p = dataset_params(load_params(["configs/ptb.yaml"]), "ptb")
    wc = type("WC", (dict,), {"dataset": "ptb"})(step=str(segment_ends(p["train"])[0]))  # a segment end, a checkpoint
    return {k: v(wc, attempt) if callable(v) else v for k, v in resources(stage(name), lambda ds: p).items()}


def test_every_rule_asks_for_its_row():
    """GPU stages a GPU (gres) with 8 CPUs beside it; runtime and memory scale with attempt;
    train and measure from their work (tests/slurm/test_resources.py)."""
    from villani.plan.stages import stage

    for rule in GPU_RULES | CPU_RULES:
        row, first, second = stage(rule), _row_resources(rule, 1), _row_resources(rule, 2)
        assert (first.get("gres") == "gpu:1") == (rule in GPU_RULES) == row.gpu, rule
        assert row.threads == (8 if rule in GPU_RULES | {"tokenize"} else 1), rule
        assert second["runtime"] == 2 * first["runtime"], f"{rule}: runtime must scale with attempt"
        assert second["mem_mb"] > first["mem_mb"], rule
        assert (row.runtime is None) == (row.mem_mb is None) == (rule in WORK_RULES) == bool(row.estimate), rule
    assert {r: stage(r).runtime for r in ("tokenize", "rays", "landscape", "cost")} == \
        {"tokenize": 120, "rays": 120, "landscape": 180, "cost": 60}


@pytest.mark.parametrize("profile", [REAL_PROFILE, CI_PROFILE], ids=["slurm", "ci-slurm"])
def test_no_forbidden_slurm_extra(profile):
    p = load(profile)
    for rule, res in {"<default>": p.get("default-resources", {}), **p.get("set-resources", {})}.items():
        extra = str(res.get("slurm_extra", ""))
        assert not FORBIDDEN_EXTRA.search(extra), f"{profile.name}/{rule}: slurm_extra {extra!r}"


def test_ci_overlay_restates_what_it_must():
    real, ci = load(REAL_PROFILE), load(CI_PROFILE)
    # The rows ask for GPT-Neo-125M's memory and 8 CPUs: the overlay sizes every queued rule
    # for the 2-CPU CI node, and asks for its typed GRES on the GPU rules.
    assert set(ci["set-resources"]) == GPU_RULES | CPU_RULES
    for rule in GPU_RULES | CPU_RULES:
        r = ci["set-resources"][rule]
        assert (r.get("gres") == "gpu:a100:1") == (rule in GPU_RULES), rule
        assert evaluate(r["mem_mb"], 2) == 2 * evaluate(r["mem_mb"], 1) <= 2 * 8000, rule
        if rule in WORK_RULES:  # the rule's own runtime, from the work
            assert "runtime" not in r, rule
        else:
            assert evaluate(r["runtime"], 2) == 2 * evaluate(r["runtime"], 1), rule
    assert ci["max-threads"] == 1 and "set-threads" not in ci
    assert ci["default-resources"]["slurm_partition"] == "debug"
    assert "slurm_account" not in ci["default-resources"]
    assert ci["slurm-status-command"] == "squeue"  # no slurmdbd: sacct would hang snakemake
    assert ci["slurm-init-seconds-before-status-checks"] == 2
    assert ci["slurm-keep-successful-logs"] is True
    assert ci["retries"] >= 1
    assert "executor" not in ci and "slurm-logdir" not in ci  # inherited from the real profile
    assert "groups" not in ci and "group-components" not in ci  # the real grouping is what CI runs
    assert ci["cores"] == ci["max-threads"]  # a group job is one member wide
    assert real["default-resources"]["slurm_extra"]


def test_stop_signal_ahead_of_the_limit():
    """Every job asks for SIGTERM ahead of its time limit (villani train saves and exits 75; the
    job-side Snakemake waits for it: SIGUSR1 would end that Snakemake, and the job step with it)."""
    for profile, lead in ((REAL_PROFILE, 300), (CI_PROFILE, 30)):
        p = load(profile)
        assert p["default-resources"]["slurm_extra"].strip("'") == f"--signal=TERM@{lead}"
        assert all("slurm_extra" not in r for r in p.get("set-resources", {}).values())  # it would replace it


@pytest.mark.slow  # 11 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_profile_rule_names_are_the_workflows():
    """set-resources of a rule the Snakefile does not have is silently ignored: a renamed
    rule would lose its GPU. Every rule is either a GPU rule here or a CPU rule."""
    res = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules", "--configfile", "tests/configs/tiny.yaml"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rules = set(res.stdout.split()) - {"all"}
    assert rules == GPU_RULES | CPU_RULES | LOCAL_RULES, f"profile rule lists out of date: {sorted(rules)}"
    assert set(load(CI_PROFILE)["set-resources"]) <= rules
