"""The CI cluster and the profile pair (profiles/slurm + tests/profiles/ci-slurm) work with
the pinned snakemake-executor-plugin-slurm, independently of villani's own workflow.

A toy Snakefile with villani's rule names goes through sbatch: GPU rules get the real
profile's `--gres=gpu:a100:1`, resources scale with `attempt` on a retry, and jobs see
the venv on PATH.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
from slurm_helpers import (
    bounded,
    job_info,
    read_json,
    slurm_logs,
    slurm_profiles,
    snakemake,
    submitted_by_rule,
    wait_job,
)

pytestmark = pytest.mark.slurm

VENV_BIN = str(Path(sys.executable).parent)
FAKE_GPU_INDICES = {"0", "1", "2", "3"}  # ci/slurm-cluster.sh: VILLANI_SLURM_GPUS fake A100s


def test_sbatch_fake_gpu_roundtrip(slurm, tmp_path):
    out = tmp_path / "job.out"
    res = bounded([
        "sbatch", "--parsable", "-p", "debug", "--gres=gpu:a100:1", "-t", "1", "--mem", "100",
        "-o", str(out), "--export=ALL",
        "--wrap", 'echo "$SLURM_JOB_ID|$CUDA_VISIBLE_DEVICES|$(command -v python)"',
    ])
    assert res.returncode == 0, res.stderr
    jobid = res.stdout.strip().split(";")[0]
    assert wait_job(jobid) == "COMPLETED"
    got_id, cuda, python = out.read_text().strip().split("|")
    assert got_id == jobid
    assert cuda in FAKE_GPU_INDICES  # a fake A100 was allocated
    assert python == os.path.join(VENV_BIN, "python"), "jobs must inherit the venv PATH"
    assert "gpu:a100:1" in job_info(jobid).get("TresPerNode", "")


@pytest.mark.parametrize("bad", [["--gres=gpu:h100:1"], ["--gres=gpu:a100:5"], ["--cpus-per-task=64"], ["--mem=999999"]])
def test_impossible_request_rejected_at_submit(slurm, bad):
    # EnforcePartLimits=ALL: a job that can never run fails at sbatch time instead of
    # pending forever (snakemake would wait forever).
    res = bounded(["sbatch", "--parsable", "-p", "debug", "-t", "1", *bad, "--wrap", "true"])
    assert res.returncode != 0, f"sbatch {bad} was accepted: {res.stdout}"


PROBE = textwrap.dedent('''\
    """Write what the job saw. --fail-once MARKER: fail the first time (marker absent)."""
    import json, os, shutil, sys
    out, runtime, mem_mb, threads = sys.argv[1:5]
    if len(sys.argv) > 6 and sys.argv[5] == "--fail-once" and not os.path.exists(sys.argv[6]):
        os.makedirs(os.path.dirname(sys.argv[6]), exist_ok=True)
        open(sys.argv[6], "w").close()
        sys.exit("failing on purpose (first attempt)")
    env = {k: os.environ.get(k) for k in (
        "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_PARTITION", "CUDA_VISIBLE_DEVICES")}
    env.update(python=shutil.which("python"), runtime=int(runtime), mem_mb=int(mem_mb),
               threads=int(threads))
    json.dump(env, open(out, "w"))
''')

TOY_SNAKEFILE = textwrap.dedent('''\
    localrules: all
    PROBE = "probe.py"
    PR = "python {PROBE} {output} {resources.runtime} {resources.mem_mb} {threads}"

    rule all:
        input: "out/report.json"

    rule tokenize:
        output: "out/tokenize.json"
        shell: PR

    # train, measure and report carry their own runtime, as villani's rules do (their stage row's
    # work estimate, villani.dag.rules.resources); the profiles hold only cluster-wide settings
    rule train:
        input: "out/tokenize.json"
        output: "out/train_{seg}.json"
        params: extra=lambda wc: "--fail-once state/train_" + wc.seg if wc.seg == "2" else ""
        resources: runtime=lambda wc, attempt: 10 * attempt
        shell: PR + " {params.extra}"

    rule measure:
        input: expand("out/train_{seg}.json", seg=[1, 2])
        output: "out/measure.json"
        resources: runtime=lambda wc, attempt: 10 * attempt
        shell: PR

    rule report:
        input: "out/measure.json"
        output: "out/report.json"
        resources: runtime=lambda wc, attempt: 10 * attempt
        shell: PR
''')


def test_toy_workflow_through_profiles(slurm, tmp_path):
    wf = tmp_path / "wf"
    wf.mkdir()
    (wf / "Snakefile").write_text(TOY_SNAKEFILE)
    (wf / "probe.py").write_text(PROBE)

    run = snakemake(wf, *slurm_profiles(), timeout=300)
    assert run.returncode == 0, run.tail()

    # every non-local job went through sbatch: tokenize, 2 x train (+1 retry), measure, report
    by_rule = submitted_by_rule(run, wf)
    assert {r: sum(map(len, ws.values())) for r, ws in by_rule.items()} == {
        "tokenize": 1, "train": 3, "measure": 1, "report": 1}, run.tail()

    outs = {p.stem: read_json(p) for p in (wf / "out").glob("*.json")}
    assert set(outs) == {"tokenize", "train_1", "train_2", "measure", "report"}
    ids = [o["SLURM_JOB_ID"] for o in outs.values()]
    all_ids = {j for ws in by_rule.values() for js in ws.values() for j in js}
    assert len(set(ids)) == 5 and set(ids) <= all_ids
    for name, o in outs.items():
        assert o["SLURM_STEP_ID"] == "0", f"{name}: not run as a job step (srun)"
        assert o["SLURM_JOB_PARTITION"] == "debug"
        assert o["python"] == os.path.join(VENV_BIN, "python"), f"{name}: venv not on PATH in the job"
        gpu_rule = name.startswith("train") or name == "measure"
        assert (o["CUDA_VISIBLE_DEVICES"] in FAKE_GPU_INDICES) == gpu_rule, (name, o)
        info = job_info(o["SLURM_JOB_ID"])
        assert ("gpu:a100:1" in info.get("TresPerNode", "")) == gpu_rule, (name, info.get("TresPerNode"))

    # resources from the overlay, scaled with `attempt` on the retry; train and measure jobs
    # are group jobs of profiles/slurm (each train job alone: they are not connected)
    assert (outs["tokenize"]["runtime"], outs["tokenize"]["mem_mb"]) == (10, 1000)
    assert (outs["train_1"]["runtime"], outs["train_1"]["mem_mb"]) == (10, 2000)
    assert (outs["train_2"]["runtime"], outs["train_2"]["mem_mb"]) == (20, 4000)  # attempt 2
    retry = outs["train_2"]["SLURM_JOB_ID"]
    (first,) = set(by_rule["train"][""]) - {retry, outs["train_1"]["SLURM_JOB_ID"]}
    assert int(first) < int(retry)
    assert job_info(first)["TimeLimit"] == "00:10:00" and job_info(first)["JobState"] == "FAILED"
    assert job_info(retry)["TimeLimit"] == "00:20:00" and job_info(retry)["JobState"] == "COMPLETED"
    assert job_info(retry)["MinMemoryNode"] == "4000M"

    # every job's log was kept, named by its SLURM job id
    logs = slurm_logs(wf)
    assert {r: sorted(p.stem for p in ps) for r, ps in logs.items()} == {
        r: sorted(j for js in ws.values() for j in js) for r, ws in by_rule.items()}
    for jobid in all_ids:  # the plugin's job comment names the rule, too
        assert job_info(jobid)["Comment"].startswith("rule_")
