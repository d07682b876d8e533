"""villani's real workflow on the loopback SLURM cluster, through the user's A100 profile
plus the CI overlay:

    snakemake --profile profiles/slurm --profile tests/profiles/ci-slurm \
              --configfile tests/configs/tiny.yaml

(a) every rule (but the local `all`) goes through sbatch, and the results are those of a
    local run: identical checkpoint weights (sha256) and measurement numbers;
(b) preemption: a running `train_segment` job is scancel'ed mid-way, snakemake's retry
    resumes it from its work state, and the final weights are an uninterrupted run's.

Each run happens in its own copy of the repository, so results/ is isolated.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import pytest

from slurm_helpers import (
    SLURM_LOGDIR,
    bounded,
    copy_repo,
    finish_run,
    job_info,
    slurm_logs,
    slurm_profiles,
    snakemake,
    submitted_by_rule,
)

pytestmark = pytest.mark.slurm

TINY = "tests/configs/tiny.yaml"
GPU_RULES = {"train_segment", "measure", "rays", "landscape"}
# fields that legitimately differ between two runs of the same computation
VOLATILE = re.compile(r"time|wall|clock|seconds|elapsed|per_s|duration|host|date|device|peak|rss|"
                      r"memory|created|version|path|pid|resumed_from", re.I)


def job_counts(run) -> dict[str, int]:
    """Per-rule job counts from the 'Job stats' table snakemake prints before running."""
    m = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+(\d+)", run.output, re.S)
    assert m, "no job stats table in snakemake's output:\n" + run.tail()
    counts = {}
    for line in m.group(1).splitlines():
        name, n = line.split()
        counts[name] = int(n)
    return counts


def strip_volatile(obj):
    if isinstance(obj, dict):
        return {k: strip_volatile(v) for k, v in obj.items() if not VOLATILE.search(k)}
    if isinstance(obj, list):
        return [strip_volatile(v) for v in obj]
    return obj


def assert_same_numbers(a, b, where: str) -> None:
    """Exact equality (CPU runs are deterministic); NaN equals NaN."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            assert_same_numbers(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_numbers(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        pass
    else:
        assert a == b, f"{where}: {a!r} (local) != {b!r} (slurm)"


def weights_digests(results: Path) -> dict[str, str]:
    from villani.atomic import sha256_file

    return {str(p.relative_to(results)): sha256_file(p) for p in sorted(results.glob("runs/**/ckpt/*.safetensors"))}


# --------------------------------------------------------------------------- (a)


@pytest.fixture(scope="module")
def local_tiny(tmp_path_factory):
    """The tiny workflow run locally (no SLURM): the reference."""
    wd = copy_repo(tmp_path_factory.mktemp("local") / "repo")
    run = snakemake(wd, "--profile", "profiles/local", "--configfile", TINY, "--cores", "2", timeout=1800)
    assert run.returncode == 0, run.tail()
    return wd, run


def test_tiny_workflow_under_slurm_equals_local(slurm, local_tiny, tmp_path):
    local_wd, local_run = local_tiny
    wd = copy_repo(tmp_path / "repo")
    t0 = time.monotonic()
    run = snakemake(wd, *slurm_profiles(), "--configfile", TINY, timeout=2400)
    print(f"tiny workflow under SLURM: {time.monotonic() - t0:.0f}s, local: {local_run.seconds:.0f}s")
    assert run.returncode == 0, run.tail()

    # every job of every rule but the local `all` was submitted with sbatch, exactly once
    expected = {r: n for r, n in job_counts(local_run).items() if r != "all"}
    assert job_counts(run) == job_counts(local_run)
    by_rule = submitted_by_rule(run, wd)
    assert {r: sum(map(len, ws.values())) for r, ws in by_rule.items()} == expected
    logs = slurm_logs(wd)
    for rule, wcs in by_rule.items():
        for wc, ids in wcs.items():
            for jobid in ids:
                info = job_info(jobid)  # SLURM's own record (kept MinJobAge=600 s)
                assert info["JobState"] == "COMPLETED", (rule, wc, jobid, info["JobState"])
                assert info["Comment"].startswith(f"rule_{rule}"), (rule, info["Comment"])
                assert info["Partition"] == "debug"
                assert ("gpu:a100:1" in info.get("TresPerNode", "")) == (rule in GPU_RULES), (rule, info)
                log = wd / SLURM_LOGDIR / f"rule_{rule}" / wc / f"{jobid}.log"
                assert log in logs[rule], log
                text = log.read_text()
                # the job-step snakemake ran exactly this rule, to the end
                assert f"rule {rule}:" in text or f"localrule {rule}:" in text, log
                assert "1 of 1 steps (100%) done" in text, log

    # same results: checkpoint weights bit for bit, measurement / metrics numbers exactly
    lres, sres = local_wd / "results", wd / "results"
    lw, sw = weights_digests(lres), weights_digests(sres)
    assert lw and lw == sw
    measures = sorted(p.relative_to(lres) for p in lres.glob("runs/**/measure/*.json"))
    assert measures and measures == sorted(p.relative_to(sres) for p in sres.glob("runs/**/measure/*.json"))
    for rel in measures:
        assert_same_numbers(strip_volatile(json.loads((lres / rel).read_text())),
                            strip_volatile(json.loads((sres / rel).read_text())), str(rel))
    assert_same_numbers(strip_volatile(json.loads((lres / "metrics.json").read_text())),
                        strip_volatile(json.loads((sres / "metrics.json").read_text())), "metrics.json")


# --------------------------------------------------------------------------- (b)

PREEMPT = {  # long enough (a few thousand fast steps) to be caught mid-segment
    "train": {"lambdas": [0.01], "seeds": [0], "steps": 3000, "segments": 2,
              "checkpoints": {"count": 2}, "save_every": 20, "noise": {"lambdas": []}},
}
RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)


def _preempt_setup(wd: Path) -> tuple[list[str], Path]:
    from villani import layout

    (wd / "preempt.yaml").write_text(json.dumps(PREEMPT))
    final = layout.fmt(layout.SEGMENT, "results", step=PREEMPT["train"]["steps"], **RUN)
    return ["--configfile", TINY, "preempt.yaml", "--", str(final)], final


def _running_train_job() -> tuple[str, str] | None:
    res = bounded(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"])
    for line in res.stdout.split():
        jobid, _, comment = line.partition("|")
        if comment.startswith("rule_train_segment"):
            return jobid, comment
    return None


def _work_step(state: Path) -> int | None:
    import torch

    try:
        return int(torch.load(state, weights_only=True)["step"])
    except Exception:  # absent, or replaced while we read it
        return None


def test_scancel_mid_segment_retry_resumes_bit_identical(slurm, tmp_path):
    from villani import layout

    end = PREEMPT["train"]["steps"]
    # uninterrupted reference, locally
    ref = copy_repo(tmp_path / "ref")
    args, final = _preempt_setup(ref)
    run = snakemake(ref, "--profile", "profiles/local", "--cores", "2", *args, timeout=900, log_name="ref.out")
    assert run.returncode == 0, run.tail()

    wd = copy_repo(tmp_path / "slurm")
    args, _ = _preempt_setup(wd)
    proc, log = snakemake(wd, *slurm_profiles(), *args, timeout=1200, log_name="slurm.out", popen=True)
    slurm.watch(proc)
    t0 = time.monotonic()
    state = layout.fmt(layout.WORK_DIR, wd / "results", **RUN) / "state.pt"

    victim = killed_at = None
    while proc.poll() is None and time.monotonic() - t0 < 600:
        job = _running_train_job()
        if job and (step := _work_step(state)) and 0 < step < end:
            victim, comment = job
            killed_at = step
            assert bounded(["scancel", victim]).returncode == 0
            break
        time.sleep(0.1)
    assert victim, "no train_segment job was caught RUNNING with a saved work state; make PREEMPT longer\n" + log.read_text()[-3000:]

    rc = proc.wait(timeout=1200)
    run = finish_run(proc.args, rc, log, time.monotonic() - t0)
    assert rc == 0, run.tail()

    # SLURM's view: the victim was cancelled, the same rule+wildcards resubmitted and completed
    assert job_info(victim)["JobState"] == "CANCELLED"
    by_rule = submitted_by_rule(run, wd)
    retried = [ids for ids in by_rule["train_segment"].values() if victim in ids]
    assert retried and len(retried[0]) == 2, by_rule
    retry = retried[0][1]
    assert job_info(retry)["JobState"] == "COMPLETED"
    # resources scaled with attempt on the retry (runtime: "15 * attempt" in the CI overlay)
    assert job_info(victim)["TimeLimit"] == "00:15:00" and job_info(retry)["TimeLimit"] == "00:30:00"
    assert "Trying to restart job" in run.output

    # training resumed from the work state (not from scratch) ...
    manifests = sorted((wd / layout.fmt(layout.SEGMENT, "results", step=0, **RUN).parent).glob("seg*.json"))
    resumed = [json.loads(p.read_text())["resumed_from_work_step"] for p in manifests]
    assert any(r is not None and r >= killed_at for r in resumed), (killed_at, resumed)
    # ... and ends exactly where an uninterrupted run ends
    assert weights_digests(wd / "results") == weights_digests(ref / "results")
    for p in sorted((ref / "results").glob("runs/**/logs/seg*.csv")):
        other = wd / p.relative_to(ref)
        a = [line.split(",")[0] for line in p.read_text().splitlines()]
        b = [line.split(",")[0] for line in other.read_text().splitlines()]
        assert a == b, f"{other}: steps logged differ from the uninterrupted run"
    assert json.loads((wd / final).read_text())["checkpoints"] == json.loads((ref / final).read_text())["checkpoints"]
