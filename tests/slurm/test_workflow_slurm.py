"""villani's real workflow on the loopback SLURM cluster, through the user's A100 profile
plus the CI overlay:

    snakemake --profile profiles/slurm --profile tests/profiles/ci-slurm \
              --configfile tests/configs/tiny.yaml

(a) every rule (but the local `all`) goes through sbatch, and the results are those of a
    local run: identical checkpoint weights (sha256) and measurement numbers;
(b) preemption: a running `train` job is scancel'ed mid-way, snakemake's retry
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
    job_info,
    slurm_logs,
    slurm_profiles,
    snakemake,
    submitted_by_rule,
    wait_run,
)

pytestmark = pytest.mark.slurm

TINY = "tests/configs/tiny.yaml"
GPU_RULES = {"train", "measure", "rays", "landscape", "cost"}
LOCAL_RULES = {"fetch", "pretrained"}  # localrules: never submitted
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
    from villani.io.atomic import sha256_file

    return {str(p.relative_to(results)): sha256_file(p) for p in sorted(results.glob("runs/**/ckpt/*/model.safetensors"))}


# --------------------------------------------------------------------------- (a)


def test_tiny_workflow_under_slurm_equals_local(slurm, tmp_path):
    # The SLURM run spends most of its time waiting (job start-up, status polling), so the
    # local reference runs meanwhile, each in its own copy of the repository.
    wd = copy_repo(tmp_path / "slurm" / "repo")
    proc, log, t0 = snakemake(wd, *slurm_profiles(), "--configfile", TINY, timeout=2400, popen=True)
    slurm.watch(proc)
    local_wd = copy_repo(tmp_path / "local" / "repo")
    local_run = snakemake(local_wd, "--profile", "profiles/local", "--configfile", TINY, "--cores", "2",
                          timeout=1800)
    assert local_run.returncode == 0, local_run.tail()
    run = wait_run(proc, log, t0, 2400)
    print(f"tiny workflow under SLURM: {run.seconds:.0f}s (local, concurrently: {local_run.seconds:.0f}s)")
    assert run.returncode == 0, run.tail()

    # every job of every rule but the localrules (all, fetch, pretrained) was submitted with sbatch, exactly once
    expected = {r: n for r, n in job_counts(local_run).items() if r not in {"all"} | LOCAL_RULES}
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
    assert_same_numbers(strip_volatile(json.loads((lres / "metrics/tiny.json").read_text())),
                        strip_volatile(json.loads((sres / "metrics/tiny.json").read_text())), "metrics/tiny.json")


# --------------------------------------------------------------------------- (b)

PREEMPT = {  # long enough (a few thousand fast steps) to be caught mid-segment
    "train": {"lambdas": [0.01], "seeds": [0], "steps": 1600, "segments": 2,
              "checkpoints": {"count": 2}, "save_every": 20, "langevin": {"lambdas": []}},
}
RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)


def _preempt_setup(wd: Path) -> tuple[list[str], Path]:
    from villani.plan import layout

    (wd / "preempt.yaml").write_text(json.dumps(PREEMPT))
    final = layout.fmt(layout.SEGMENT, "results", step=PREEMPT["train"]["steps"], **RUN)
    return ["--configfile", TINY, "preempt.yaml", "--", str(final)], final


def _running_train_job() -> tuple[str, str] | None:
    res = bounded(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"])
    for line in res.stdout.split():
        jobid, _, comment = line.partition("|")
        if comment.startswith("rule_train"):
            return jobid, comment
    return None


def _work_step(state: Path) -> int | None:
    import torch

    try:
        return int(torch.load(state, weights_only=True)["step"])
    except Exception:  # absent, or replaced while we read it
        return None


def _log_rows(csv: Path) -> list[dict]:
    """A segment's per-step log without its timing column."""
    import pandas as pd

    df = pd.read_csv(csv)
    return df[[c for c in df.columns if not VOLATILE.search(c)]].to_dict("records")


def test_scancel_mid_segment_retry_resumes_bit_identical(slurm, tmp_path):
    from villani.plan import layout

    end = PREEMPT["train"]["steps"]
    wd = copy_repo(tmp_path / "slurm" / "repo")
    args, final = _preempt_setup(wd)
    proc, log, t0 = snakemake(wd, *slurm_profiles(), *args, timeout=1200, popen=True)
    slurm.watch(proc)
    # the uninterrupted reference runs locally meanwhile
    ref = copy_repo(tmp_path / "ref" / "repo")
    _preempt_setup(ref)
    ref_proc, ref_log, ref_t0 = snakemake(ref, "--profile", "profiles/local", "--cores", "2", *args,
                                          timeout=900, popen=True)
    slurm.watch(ref_proc)

    state = layout.fmt(layout.WORK_DIR, wd / "results", **RUN) / "state.pt"
    victim = killed_at = None
    while proc.poll() is None and time.monotonic() - t0 < 600:
        job = _running_train_job()
        if job and (step := _work_step(state)) and 0 < step < end:
            victim, killed_at = job[0], step
            assert bounded(["scancel", victim]).returncode == 0
            break
        time.sleep(0.1)
    assert victim, ("no train job was caught RUNNING with a saved work state; make PREEMPT longer\n"
                    + log.read_text()[-3000:])

    ref_run = wait_run(ref_proc, ref_log, ref_t0, 900)
    assert ref_run.returncode == 0, ref_run.tail()
    run = wait_run(proc, log, t0, 1200)
    print(f"preemption run under SLURM: {run.seconds:.0f}s; killed job {victim} at work step {killed_at}")
    assert run.returncode == 0, run.tail()

    # SLURM's view: the victim was cancelled, the same rule+wildcards resubmitted and completed
    assert job_info(victim)["JobState"] == "CANCELLED"
    by_rule = submitted_by_rule(run, wd)
    retried = [ids for ids in by_rule["train"].values() if victim in ids]
    assert retried and retried[0] == sorted(retried[0], key=int) and len(retried[0]) == 2, by_rule
    retry = retried[0][1]
    assert job_info(retry)["JobState"] == "COMPLETED"
    # resources scaled with attempt on the retry (runtime: "15 * attempt" in the CI overlay)
    assert job_info(victim)["TimeLimit"] == "00:15:00" and job_info(retry)["TimeLimit"] == "00:30:00"
    assert "Trying to restart job" in run.output

    # training resumed from the work state (not from scratch) ...
    seg_dir = wd / layout.fmt(layout.SEGMENT, "results", step=0, **RUN).parent
    resumed = [json.loads(p.read_text())["resumed_from_work_step"] for p in sorted(seg_dir.glob("seg*.json"))]
    assert any(r is not None and killed_at <= r < end for r in resumed), (killed_at, resumed)
    # ... and ends exactly where the uninterrupted run ends: weights, manifests, step logs
    assert weights_digests(wd / "results") == weights_digests(ref / "results")
    assert json.loads((wd / final).read_text())["checkpoints"] == json.loads((ref / final).read_text())["checkpoints"]
    csvs = sorted(p.relative_to(ref) for p in (ref / "results").glob("runs/**/logs/seg*.csv"))
    assert len(csvs) == PREEMPT["train"]["segments"]
    for rel in csvs:
        assert _log_rows(wd / rel) == _log_rows(ref / rel), f"{rel}: per-step log differs from the uninterrupted run"
