"""What train and measure jobs ask SLURM for, from the work they do (villani.dag.resources);
pure functions, no cluster."""

from __future__ import annotations

import math

import pytest

from villani.dag import resources as R
from villani.plan.config import dataset_params, load_params, resolve
from villani.plan.schedule import checkpoint_steps, segment_ends


def _with(p, group, **changes):
    return resolve({**p, group: {**p[group], **changes}})


@pytest.fixture(scope="module")
def ptb():
    """The paper preset's PTB, a train job per run's segment (jobs.runs_per_device: 1)."""
    return _with(dataset_params(load_params(["configs/paper.yaml"]), "ptb"), "jobs", runs_per_device=1)


def test_train_work_is_steps_times_tokens_at_the_measured_rate(ptb):
    end = segment_ends(ptb["train"])[0]
    tokens = end * ptb["train"]["batch_size"] * ptb["data"]["seq_len"]  # the first segment starts at 0
    seconds, nbytes = R.train_work(ptb, end)
    assert seconds == pytest.approx(tokens / 8_609)  # the H200's bf16 tokens/s at 1 × 512 (gpu_check)
    assert nbytes == pytest.approx(5.20 * 2**30)  # 1 × 512 tokens per step: the rehearsal's job
    # twice the tokens per step: twice the time, a bigger graph
    wide = _with(ptb, "train", batch_size=2)
    assert R.train_work(wide, end)[0] == pytest.approx(2 * seconds)
    assert R.train_work(wide, end)[1] == pytest.approx(nbytes + 512 * 3.95 * 2**20)
    # a PTB segment asks for minutes of GPU work, not the old 240 (docs/slurm.md)
    assert R.job_runtime("train", ptb, end, 1) == math.ceil((300 + 1.5 * seconds) / 60) < 15


def test_measure_work_is_hvps_times_tokens(ptb):
    m = ptb["measure"]
    steps = checkpoint_steps(ptb["train"])
    # at a spectrum checkpoint (every 20th): Lanczos 60 + at most 64 deflated probes; one SLQ
    # start at d = 1.25e8 (slq_cdf_tol); elsewhere the trace only — doubly stochastic, at most
    # the tokens of 64 whole-set products
    assert m["spectrum_every"] == 20 and R.max_hvps(m, steps[20], steps) == 60 + 64
    assert R.max_hvps(m, steps[3], steps) == 64
    full = _with(ptb, "measure", full_density="every")["measure"]
    assert R.max_hvps(full, steps[20], steps) == 60 + (m["slq_probes"] - 1) * m["slq_steps"] + 64
    seconds, nbytes = R.measure_work(ptb, steps[20])
    assert seconds == pytest.approx(124 * 64 * 511 * 3.40 * (67.0 / 19.5) / 32_704)  # H200 s/HVP → A100 by fp32 peak
    assert nbytes == pytest.approx(17.12 * 2**30 + 3.95 * 2**20 * (8 * 511 - 511))
    half = _with(ptb, "measure", blocks=32)
    assert R.measure_work(half, steps[20])[0] == pytest.approx(seconds / 2)


def test_a_per_run_measure_job_asks_for_its_checkpoints_work_at_one_start_up(ptb):
    """jobs.measure: run — one job measures every checkpoint: the sum of their work, the
    largest memory, start-up once."""
    steps = checkpoint_steps(ptb["train"])
    works = [R.measure_work(ptb, s) for s in steps]
    seconds, nbytes = R.run_work("measure", ptb)
    assert seconds == pytest.approx(sum(w[0] for w in works)) and nbytes == max(w[1] for w in works)
    assert R.job_runtime("measure", ptb, None, 1) == math.ceil((300 + 1.5 * seconds) / 60)
    assert R.job_runtime("measure", ptb, None, 1) < len(steps) * R.job_runtime("measure", ptb, steps[1], 1)
    assert R.job_mem_mb("measure", ptb, None, 2) == 2 * R.job_mem_mb("measure", ptb, steps[1], 1)


def test_a_per_run_train_job_asks_for_its_segments_work_at_one_start_up(ptb):
    """jobs.train: run — one job trains every segment: the sum of their work, start-up once."""
    ends = segment_ends(ptb["train"])
    seconds, nbytes = R.run_work("train", ptb)
    assert seconds == pytest.approx(sum(R.train_work(ptb, e)[0] for e in ends))
    assert nbytes == max(R.train_work(ptb, e)[1] for e in ends)
    assert R.job_runtime("train", ptb, None, 1) == math.ceil((300 + 1.5 * seconds) / 60)
    assert R.job_runtime("train", ptb, None, 1) < sum(R.job_runtime("train", ptb, e, 1) for e in ends)


def test_seeds_side_by_side_ask_for_every_seed_s_work(ptb):
    """jobs.runs_per_device: a job of the s seeds of one (update rule, λ), k at a time: s runs'
    work at one run's rate (no gain from sharing assumed), k runs' host memory; auto: the
    seeds that fit 90 % of an 80 GB GPU at the estimated memory per process."""
    end = segment_ends(ptb["train"])[0]
    seconds, nbytes = R.train_work(ptb, end)
    seeds = len(ptb["train"]["seeds"])
    assert seeds == 3 and R.runs_per_device(ptb) == 1
    for k, at_once in ((2, 2), (3, 3), (8, 3), ("auto", 3)):
        side = _with(ptb, "jobs", runs_per_device=k)
        assert R.train_work(side, end) == pytest.approx((seeds * seconds, at_once * nbytes)), k
    assert R.train_gpu_bytes(ptb) == pytest.approx(18 * R.D_125M + 1.5 * 2**30 + 512 * 2 * 2**20)
    # batches whose activations fill the GPU: fewer runs at a time, at least one
    big = _with(_with(ptb, "jobs", runs_per_device="auto"), "train", batch_size=24)
    assert R.runs_per_device(big) == math.floor(0.9 * 80e9 / R.train_gpu_bytes(big)) == 2
    assert R.runs_per_device(_with(big, "train", batch_size=64)) == 1


def test_retries_grow_and_memory_is_capped(ptb):
    end = segment_ends(ptb["train"])[-1]
    for rule, step in (("train", end), ("measure", end)):
        one, two = R.job_runtime(rule, ptb, step, 1), R.job_runtime(rule, ptb, step, 2)
        assert two == 2 * one
        assert R.job_mem_mb(rule, ptb, step, 2) == min(2 * R.job_mem_mb(rule, ptb, step, 1), R.MEM_CAP_MB)
    assert R.mem_mb(1e12, 1) == R.MEM_CAP_MB
    assert R.runtime_min(0, 1) == 5  # start-up alone


@pytest.mark.slow  # 15 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_rules_ask_for_their_work():
    """The Snakefile's train and measure jobs carry these values (no profile overrides them):
    a dry run of tests/configs/tiny.yaml through profiles/slurm, one job per segment and
    checkpoint, lists each job's runtime and mem_mb as villani.dag.resources computes them."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    jobs = root / "tests" / "configs" / "tiny.yaml"
    split = Path(__import__("tempfile").mkdtemp()) / "jobs.yaml"
    split.write_text("jobs: {measure: checkpoint, train: segment}\n")
    cmd = [sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm", "--configfile", str(jobs), str(split)]
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    p = load_params([root / "params.yaml", jobs, split])
    tiny = dataset_params(p, "tiny")
    seen = 0
    for rule, step, resources in re.findall(r"^\s*rule (train|measure):\n(?:\s+\w+: .*\n)*?\s+wildcards: .*?step=(\d+)"
                                           r"\n\s+threads: \d+\n\s+resources: ([^\n]*)", text, re.M):
        got = dict(kv.split("=", 1) for kv in resources.split(", "))
        assert int(got["runtime"]) == R.job_runtime(rule, tiny, int(step), 1), (rule, step, resources)
        assert int(got["mem_mb"]) == R.job_mem_mb(rule, tiny, int(step), 1), (rule, step, resources)
        seen += 1
    assert seen >= 6, text[-3000:]


def test_readme_requests():
    """The requests docs/slurm.md quotes for configs/paper.yaml (minutes, attempt 1)."""
    doc = load_params(["configs/paper.yaml"])
    for name, per_device, segment, run, measure in (
            ("ptb", 1, 12, 240, {24, 42}), ("wikitext103", 1, 147, 1764, {42}),  # a job per run's segment
            ("ptb", "auto", 24, 480, {24, 42}), ("wikitext103", "auto", 431, 5172, {42})):  # as shipped: 3 seeds
        p = _with(dataset_params(doc, name), "jobs", runs_per_device=per_device)
        minutes = [R.job_runtime("train", p, end, 1) for end in segment_ends(p["train"])]
        assert set(minutes) == {segment} and sum(minutes) == run
        assert {R.job_runtime("measure", p, s, 1) for s in checkpoint_steps(p["train"])} == measure
