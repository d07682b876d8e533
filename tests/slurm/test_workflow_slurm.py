"""villani's real workflow on the loopback SLURM cluster, through the user's A100 profile
plus the CI overlay:

    snakemake --profile profiles/slurm --profile tests/profiles/ci-slurm \
              --configfile tests/configs/tiny.yaml cluster-jobs.yaml

(cluster-jobs.yaml: the presets' job per segment and per checkpoint.)
(a) every rule (but the local `all`) goes through sbatch, and the results are those of a
    local run with params.yaml's job per run: identical checkpoint weights (sha256) and
    measurement numbers;
(b) preemption: a running `train` job is scancel'ed mid-way, snakemake's retry
    resumes it from its work state, and the final weights are an uninterrupted run's;
(c) seeds side by side (jobs.runs_per_device: 2): the two seeds of one (update rule, λ)
    are one SLURM group job whose members each run both seeds' `villani train` at once on
    the job's one GPU, with the weights and step logs of each run trained alone.

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
    bounded,
    copy_repo,
    job_info,
    slurm_logs,
    slurm_profiles,
    snakemake,
    submitted_by_rule,
    wait_run,
)

from villani.dag import submissions as S
from villani.dag.resources import job_runtime
from villani.plan.config import dataset_names, dataset_params, load_params
from villani.plan.schedule import segment_ends

pytestmark = pytest.mark.slurm

TINY = "tests/configs/tiny.yaml"
CLUSTER_JOBS = "cluster-jobs.yaml"  # the presets' job split (params.yaml: a job per run)
CLUSTER_JOBS_YAML = "jobs: {measure: checkpoint, train: segment}\n"
GPU_RULES = {"train", "measure", "rays", "landscape", "cost"}
LOCAL_RULES = {"fetch", "pretrained", "plan"}  # localrules: never submitted
# fields that legitimately differ between two runs of the same computation (the hashes of a
# record and of the checkpoint.json it names cover its write time; the weights are compared apart)
VOLATILE = re.compile(r"time|wall|clock|seconds|elapsed|per_s|duration|host|date|device|peak|rss|"
                      r"memory|created|version|path|pid|resumed_from|record_sha256|checkpoint_meta_sha256", re.I)


def job_counts(run) -> dict[str, int]:
    """Per-rule job counts from the 'Job stats' table snakemake prints before running."""
    m = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+(\d+)", run.output, re.S)
    assert m, "no job stats table in snakemake's output:\n" + run.tail()
    counts = {}
    for line in m.group(1).splitlines():
        name, n = line.split()
        counts[name] = int(n)
    return counts


def DP(doc):
    """The parameters of the document's (first) dataset."""
    return dataset_params(doc, dataset_names(doc)[0])


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
    # SLURM: a job per segment and per checkpoint, as the presets; local: params.yaml's job per
    # run (jobs.train / jobs.measure: run) — the two splits must give the same results
    wd = copy_repo(tmp_path / "slurm" / "repo")
    (wd / CLUSTER_JOBS).write_text(CLUSTER_JOBS_YAML)
    proc, log, t0 = snakemake(wd, *slurm_profiles(), "--configfile", TINY, CLUSTER_JOBS, timeout=2400, popen=True)
    slurm.watch(proc)
    local_wd = copy_repo(tmp_path / "local" / "repo")
    local_run = snakemake(local_wd, "--profile", "profiles/local", "--configfile", TINY, "--cores", "2",
                          timeout=1800)
    assert local_run.returncode == 0, local_run.tail()
    run = wait_run(proc, log, t0, 2400)
    print(f"tiny workflow under SLURM: {run.seconds:.0f}s (local, concurrently: {local_run.seconds:.0f}s)")
    assert run.returncode == 0, run.tail()

    # every job ran, in the submissions villani.dag.submissions counts: the ungrouped rules'
    # jobs once each, a group job per training run (its segments in sequence) and per
    # bundle of measure jobs; no retry was needed
    doc = load_params([str(wd / "params.yaml"), str(wd / TINY), str(wd / CLUSTER_JOBS)])
    local_doc = load_params([str(local_wd / "params.yaml"), str(local_wd / TINY)])
    assert (S.job_counts(doc)["train"], S.job_counts(doc)["measure"]) == (6, 15)  # 3 runs × 2 segments / × 5 checkpoints
    assert (S.job_counts(local_doc)["train"], S.job_counts(local_doc)["measure"]) == (3, 3)  # a job per run
    assert job_counts(run) == dict(S.job_counts(doc)) and job_counts(local_run) == dict(S.job_counts(local_doc))
    expected = {r: n for r, n in S.submissions(doc, wd / "profiles/slurm/config.yaml").items() if r != "total"}
    by_rule = submitted_by_rule(run, wd)
    assert {r: sum(map(len, ws.values())) for r, ws in by_rule.items()} == expected
    assert len(run.submitted) == S.submissions(doc, wd / "profiles/slurm/config.yaml")["total"]
    logs = slurm_logs(wd)
    train_limit = sum(job_runtime("train", DP(doc), end, 1) for end in segment_ends(DP(doc)["train"]))
    for rule, wcs in by_rule.items():
        for wc, ids in wcs.items():
            for jobid in ids:
                info = job_info(jobid)  # SLURM's own record (kept MinJobAge=600 s)
                assert info["JobState"] == "COMPLETED", (rule, wc, jobid, info["JobState"])
                assert info["Comment"].startswith(f"rule_{rule}"), (rule, info["Comment"])
                assert info["Partition"] == "debug"
                assert ("gpu:a100:1" in info.get("TresPerNode", "")) == (rule in GPU_RULES), (rule, info)
                if rule == "train":  # a run's segments in sequence: their derived runtimes add up
                    assert info["TimeLimit"] == f"00:{train_limit:02d}:00", (info["TimeLimit"], train_limit)
                log = next(p for p in logs[rule] if p.name == f"{jobid}.log")
                text = log.read_text()
                # the job-step snakemake ran this rule's jobs (a group job: all its members), to the end
                assert f"rule {rule}:" in text or f"localrule {rule}:" in text, log
                assert re.search(r"(\d+) of \1 steps \(100%\) done", text), log

    # same results from either job split: checkpoint weights bit for bit, measurement / metrics numbers exactly
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

PREEMPT = {  # one run, two segments; no periodic work state: every one is a stop's
    "train": {"lambdas": [0.01], "seeds": [0], "steps": 1000, "segments": 2,
              "checkpoints": {"count": 2}, "save_every": 100_000, "langevin": {"lambdas": []}},
}
RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)


def _preempt_setup(wd: Path) -> tuple[list[str], Path]:
    from villani.plan import layout

    (wd / "preempt.yaml").write_text(json.dumps(PREEMPT))
    (wd / CLUSTER_JOBS).write_text(CLUSTER_JOBS_YAML)
    final = layout.fmt(layout.SEGMENT, "results", step=PREEMPT["train"]["steps"], **RUN)
    return ["--configfile", TINY, CLUSTER_JOBS, "preempt.yaml", "--", str(final)], final


def _train_job(states=("RUNNING",)) -> str | None:
    res = bounded(["squeue", "-h", "-t", ",".join(states), "-o", "%i|%k"])
    for line in res.stdout.split():
        jobid, _, comment = line.partition("|")
        if comment.startswith("rule_train"):
            return jobid
    return None


def _villani_trains(jobid: str) -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every `villani train` process of SLURM job ``jobid`` (same machine: /proc):
    the console script's, and the `python -m villani.cli train` of seeds side by side."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"train" in argv and any(a.endswith((b"villani", b"villani.cli")) for a in argv[:3]) and \
                f"SLURM_JOB_ID={jobid}".encode() in env:
            found.append((int(d.name), argv))
    return found


def _villani_train_pid(jobid: str) -> int | None:
    """The `villani train` process of SLURM job ``jobid``."""
    return next((pid for pid, _ in _villani_trains(jobid)), None)


def _work_state(state: Path) -> dict | None:
    import torch

    try:
        return torch.load(state, weights_only=True)
    except Exception:  # absent, or replaced while we read it
        return None


def _log_rows(csv: Path) -> list[dict]:
    """A segment's per-step log without its timing column."""
    import pandas as pd

    df = pd.read_csv(csv)
    return df[[c for c in df.columns if not VOLATILE.search(c)]].to_dict("records")


def _pending_stop_signal(pid: int) -> bool:
    """Whether SIGTERM or SIGUSR1 is pending on process ``pid`` (/proc: its SigPnd and
    ShdPnd masks; a stopped process keeps what was sent to it pending until SIGCONT)."""
    import signal

    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    pending = 0
    for key in ("SigPnd", "ShdPnd"):
        m = re.search(rf"^{key}:\s*([0-9a-fA-F]+)$", status, re.M)
        pending |= int(m.group(1), 16) if m else 0
    return any(pending >> (int(sig) - 1) & 1 for sig in (signal.SIGTERM, signal.SIGUSR1))


def _stop_mid_training(jobid: str, trained, stop: list[str], timeout: float = 300) -> None:
    """Freeze the job's `villani train` once it has trained a few steps (so the stop falls
    mid-segment however fast the machine), run ``stop`` (a SLURM command), and let the
    process go on as soon as SLURM's signal (SIGTERM ahead of the limit, at it, or on
    scancel) is pending on it, or SLURM has resumed it itself (it sends SIGCONT with
    SIGTERM): it handles the signal at once, well inside KillWait. (Waiting instead for the
    job to leave RUNNING let SLURM's SIGKILL reach the frozen process on a slow machine.)"""
    import os
    import signal

    deadline = time.monotonic() + timeout
    pid = None
    while time.monotonic() < deadline and not (pid and trained() > 5):
        pid = _villani_train_pid(jobid)
        time.sleep(0.05)
    assert pid and trained() > 5, f"job {jobid}: `villani train` not seen training"
    os.kill(pid, signal.SIGSTOP)
    try:
        assert bounded([*stop]).returncode == 0, stop
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not _pending_stop_signal(pid):
            time.sleep(0.05)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # SLURM sends SIGCONT with its SIGTERM: the process may have saved and exited;
            # whether it saved its work state at the step it reached is what the caller checks
    while time.monotonic() < deadline and _train_job(("RUNNING", "COMPLETING")) == jobid:
        time.sleep(0.5)


def _saved_step(state: Path, partial) -> int:
    """The step of the work state a stop wrote; every step the stopped job logged is in it."""
    st = _work_state(state)
    assert st is not None, "the stopped job left no work state"
    rows = len(partial(int(st["step"])).read_text().splitlines()) - 1
    assert rows == st["log_rows"], "the stopped job logged steps its work state does not hold"
    return int(st["step"])


def test_time_limit_then_scancel_resume_bit_identical(slurm, tmp_path):
    """A run's training (one group job: its two segments) reaches its time limit
    mid-segment (SIGTERM ahead of it and at it), its retry is scancelled mid-segment,
    the third attempt finishes: each stop wrote the work state at the step it reached, each
    retry resumed there, and the final weights and per-step logs are an uninterrupted run's."""
    from villani.plan import layout

    wd = copy_repo(tmp_path / "slurm" / "repo")
    args, final = _preempt_setup(wd)
    proc, log, t0 = snakemake(wd, *slurm_profiles(), "--retries", "2", *args, timeout=1500, popen=True)
    slurm.watch(proc)
    ref = copy_repo(tmp_path / "ref" / "repo")
    _preempt_setup(ref)
    ref_proc, ref_log, ref_t0 = snakemake(ref, "--profile", "profiles/local", "--cores", "1", *args,
                                          timeout=1200, popen=True)
    slurm.watch(ref_proc)

    p = DP(load_params([str(wd / "params.yaml"), str(wd / TINY), str(wd / CLUSTER_JOBS), str(wd / "preempt.yaml")]))
    ends, state = segment_ends(p["train"]), layout.fmt(layout.WORK_DIR, wd / "results", **RUN) / "state.pt"

    def partial(step):
        return layout.fmt(layout.SEGMENT_LOG_PARTIAL, wd / "results", step=next(e for e in ends if e > step), **RUN)

    def trained() -> int:
        """The step training has reached: the growing per-step log of the segment in progress."""
        for start, end in zip([0, *ends], ends):
            f = layout.fmt(layout.SEGMENT_LOG_PARTIAL, wd / "results", step=end, **RUN)
            if f.exists():
                return start + len(f.read_text().splitlines()) - 1
        return 0

    def next_train_job(after: set[str]) -> str:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if (job := _train_job()) and job not in after:
                return job
            time.sleep(0.2)
        raise AssertionError("no train job ran\n" + log.read_text()[-3000:])

    first = next_train_job(set())  # attempt 1: its time limit cut to 1 minute mid-training
    _stop_mid_training(first, trained, ["scontrol", "update", f"JobId={first}", "TimeLimit=1"])
    limited_at = _saved_step(state, partial)
    assert job_info(first)["TimeLimit"] == "00:01:00"
    assert job_info(first)["JobState"] in ("TIMEOUT", "FAILED")  # FAILED: SIGTERM ahead of the limit ended it
    second = next_train_job({first})  # attempt 2: scancelled once past the first stop
    _stop_mid_training(second, lambda: trained() - limited_at, ["scancel", second])
    cancelled_at = _saved_step(state, partial)
    assert 0 < limited_at < cancelled_at < PREEMPT["train"]["steps"]

    ref_run = wait_run(ref_proc, ref_log, ref_t0, 1200)
    assert ref_run.returncode == 0, ref_run.tail()
    run = wait_run(proc, log, t0, 1500)
    print(f"time limit + scancel under SLURM: {run.seconds:.0f}s; stopped at steps {limited_at}, {cancelled_at}")
    assert run.returncode == 0, run.tail()
    assert job_info(second)["JobState"] == "CANCELLED"
    (ids,) = submitted_by_rule(run, wd)["train"].values()
    assert sorted(ids, key=int) == [first, second, ids[-1]], ids
    # a group job's time limit: its segments' derived runtimes summed, × attempt
    limit = sum(job_runtime("train", p, end, 1) for end in ends)
    assert [job_info(j)["TimeLimit"] for j in ids[1:]] == [f"00:{2 * limit:02d}:00", f"00:{3 * limit:02d}:00"]
    assert job_info(ids[-1])["JobState"] == "COMPLETED"

    # the last attempt resumed at the step the scancel's stop saved (no step recomputed) ...
    seg_dir = wd / layout.fmt(layout.SEGMENT, "results", step=0, **RUN).parent
    resumed = [json.loads(f.read_text())["resumed_from_work_step"] for f in sorted(seg_dir.glob("seg*.json"))]
    assert cancelled_at in resumed, (cancelled_at, resumed)
    # ... and ends exactly where the uninterrupted run ends: weights, manifests, step logs
    assert weights_digests(wd / "results") == weights_digests(ref / "results")
    # (checkpoint.json records wall-clock seconds, so its own sha256 differs between runs)
    def steps_and_weights(f):
        return [(c["step"], c["weights_sha256"]) for c in json.loads(f.read_text())["checkpoints"]]

    assert steps_and_weights(wd / final) == steps_and_weights(ref / final)
    csvs = sorted(f.relative_to(ref) for f in (ref / "results").glob("runs/**/logs/seg*.csv"))
    assert len(csvs) == PREEMPT["train"]["segments"]
    for rel in csvs:
        assert _log_rows(wd / rel) == _log_rows(ref / rel), f"{rel}: per-step log differs from the uninterrupted run"


# --------------------------------------------------------------------------- (c)

PACKED = {"train": {"lambdas": [0.01], "seeds": [0, 1], "langevin": {"lambdas": []}},
          "jobs": {"measure": "checkpoint", "train": "segment", "runs_per_device": 2}}


def _train_processes(jobid: str) -> int:
    """How many single-seed `villani train` processes of SLURM job ``jobid`` run now."""
    return sum(b"--per-device" not in argv for _, argv in _villani_trains(jobid))


def test_seeds_side_by_side_are_one_packed_group_job(slurm, tmp_path):
    """Two seeds side by side: one train submission (the pack's two segments in sequence), in
    which both seeds' processes run at once; its time limit is the two segments' derived
    runtimes for both seeds; each run's weights and step logs are those of the local run,
    where every run is a job of its own (≈ 60 s: a tokenize job, then the group job)."""
    from villani.plan import layout

    wd, ref = copy_repo(tmp_path / "slurm" / "repo"), copy_repo(tmp_path / "ref" / "repo")
    (wd / "packed.yaml").write_text(json.dumps(PACKED))
    (ref / "packed.yaml").write_text(json.dumps({**PACKED, "jobs": {"measure": "checkpoint", "train": "segment"}}))
    finals = [str(layout.fmt(layout.SEGMENT, "results", step=24, **{**RUN, "seed": s})) for s in (0, 1)]
    args = ["--configfile", TINY, "packed.yaml", "--", *finals]
    proc, log, t0 = snakemake(wd, *slurm_profiles(), *args, timeout=900, popen=True)
    slurm.watch(proc)
    ref_run = snakemake(ref, "--profile", "profiles/local", "--cores", "1", *args, timeout=900)
    assert ref_run.returncode == 0, ref_run.tail()
    most, deadline = 0, time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if job := _train_job():
            most = max(most, _train_processes(job))
        time.sleep(0.2)
    run = wait_run(proc, log, t0, 900)
    print(f"seeds side by side under SLURM: {run.seconds:.0f}s; at most {most} train processes at once")
    assert run.returncode == 0, run.tail()
    (ids,) = submitted_by_rule(run, wd)["train"].values()
    assert len(ids) == 1 and job_info(ids[0])["JobState"] == "COMPLETED", ids
    assert most == 2, "the two seeds did not train at the same time"
    p = DP(load_params([str(wd / "params.yaml"), str(wd / TINY), str(wd / "packed.yaml")]))
    limit = sum(job_runtime("train", p, end, 1) for end in segment_ends(p["train"]))
    assert job_info(ids[0])["TimeLimit"] == f"00:{limit:02d}:00"
    assert weights_digests(wd / "results") == weights_digests(ref / "results") != {}
    csvs = sorted(f.relative_to(ref) for f in (ref / "results").glob("runs/**/logs/seg*.csv"))
    assert len(csvs) == 4
    for rel in csvs:
        assert _log_rows(wd / rel) == _log_rows(ref / rel), rel
