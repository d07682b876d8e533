"""What the workflow does with a lost file and with a failed job, driven as a user drives it:
`make run`'s command (`villani run-lock -- snakemake --profile profiles/local`) in a clone
with the tiny values in params.yaml.

- A deleted declared output (a measurement's Parquet beside its JSON) is made again by the
  workflow, and by the command the message of the stage that misses it prints.
- A job that fails leaves the previous outputs in place, byte for byte — the bounds of an
  edited measurement, the segment manifests and step logs of a truncated train.parquet,
  which keep vouching for their checkpoints — and the next run redoes it (`snakemake -n`
  lists it) until the command its message prints has mended the input.
- Parameters whose model the model class refuses stop the workflow before any job.

One workflow run (the module fixture) serves the file; each test leaves the clone complete
and up to date ("Nothing to be done").
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import copy_repo
from tests.workflow.conftest import BIN, env, git_repo, run, write_params
from villani.io.atomic import sha256_file
from villani.plan import layout

pytestmark = pytest.mark.slow

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
MAKE_RUN = [BIN / "villani", "run-lock", "--", BIN / "snakemake", "--profile", "profiles/local", "--cores", "2"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A clone with the tiny values in params.yaml after `make run`'s command."""
    work = copy_repo(tmp_path_factory.mktemp("failed-jobs"))
    write_params(work / "params.yaml")
    git_repo(work)
    run(MAKE_RUN, cwd=work, timeout=2400)
    return work


def _make_run(work: Path) -> subprocess.CompletedProcess:
    return run(MAKE_RUN, cwd=work, check=False, timeout=2400)


def _nothing_to_do(work: Path) -> bool:
    out = run([BIN / "snakemake", "-n", "--profile", "profiles/local"], cwd=work)
    return "Nothing to be done" in out.stdout + out.stderr


def _planned(work: Path) -> set[str]:
    """The rules `snakemake -n` would run."""
    out = run([BIN / "snakemake", "-n", "--profile", "profiles/local"], cwd=work)
    return set(re.findall(r"^\s*(?:local)?rule (\w+):", out.stdout + out.stderr, re.M)) - {"all"}


def _error(text: str) -> str:
    """The first `villani: error:` line of a command's or a run's output."""
    m = re.search(r"villani: error: ([^\n]*)", text)
    assert m, text[-4000:]
    return m.group(1)


def _suggested(line: str) -> list[str]:
    return re.findall(r"`(villani [^`]+)`", line)


def _sh(work: Path, line: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=work, env=env(), capture_output=True, text=True, timeout=1200)


def _files(work: Path, *patterns: str) -> dict[str, str]:
    """sha256 of every file under results/ matching one of ``patterns`` (globs)."""
    return {str(f.relative_to(work)): sha256_file(f) for p in patterns for f in sorted((work / "results").glob(p))}


def test_a_deleted_measurement_parquet_is_made_again(work):
    """The issue's case: `villani figures` names the command that measures the checkpoint
    again, which brings the file back; deleted again, `make run` makes it again (before: it
    said "Nothing to be done")."""
    parquet = layout.fmt(layout.MEASURE_PARQUET, work / "results", step=24, **RUN)
    parquet.unlink()
    p = _sh(work, "villani figures --dataset tiny")
    line = _error(p.stderr)
    assert p.returncode == 2 and "measurement samples not found" in line and line.endswith("(or the workflow)"), line
    [cmd] = _suggested(line)
    assert cmd == "villani measure --dataset tiny --variant adamw --lam 0.01 --seed 0 --step 24"
    assert _sh(work, cmd).returncode == 0 and parquet.exists()
    parquet.unlink()
    assert "measure" in _planned(work)
    out = _make_run(work)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert parquet.exists() and _nothing_to_do(work)


def test_a_failed_job_keeps_the_previous_outputs_and_runs_again_next_time(work):
    """An edited measure JSON: the jobs that read it fail with a one-line message; the bounds
    (and every other output of theirs) stay byte for byte; the next `snakemake -n` lists the
    failed jobs again; the command the message prints mends the file and `make run` ends."""
    kept = _files(work, "bounds/tiny/*", "claims/tiny*", "figures/tiny/*", "metrics/*.json")
    path = layout.fmt(layout.MEASURE_JSON, work / "results", step=12, **RUN)
    path.write_text(json.dumps(dict(json.loads(path.read_text()), val_loss=0.5), indent=2))
    out = _make_run(work)
    assert out.returncode != 0
    line = _error(out.stdout + out.stderr)
    assert "measurement was changed after it was written" in line, line
    assert _files(work, "bounds/tiny/*", "claims/tiny*", "figures/tiny/*", "metrics/*.json") == kept
    assert not _nothing_to_do(work) and "bounds" in _planned(work)
    [cmd] = _suggested(line)
    assert cmd == "villani measure --dataset tiny --variant adamw --lam 0.01 --seed 0 --step 12"
    assert _sh(work, cmd).returncode == 0
    out = _make_run(work)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert _nothing_to_do(work)


def test_a_failed_training_job_keeps_the_manifests_that_vouch_for_its_checkpoints(work):
    """A truncated train.parquet: the jobs that read it fail (the training jobs find every
    segment done and read nothing); every segment manifest and step log stays byte for byte
    and every checkpoint still verifies against them; the failed jobs are planned again; the
    command the message prints writes the same token blocks and `make run` ends with the same
    weights."""
    from villani.plan.config import load_params
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps
    from villani.training.checkpoint import read_meta

    manifests = _files(work, "runs/tiny/*/*/*/segments/*.json", "runs/tiny/*/*/*/logs/*.csv")
    weights = _files(work, "runs/tiny/*/*/*/ckpt/*/model.safetensors")
    train = work / "results" / "data" / "tiny" / "train.parquet"
    train.write_bytes(train.read_bytes()[:2000])
    out = _make_run(work)
    assert out.returncode != 0
    line = _error(out.stdout + out.stderr)
    assert "train.parquet" in line, line
    assert _files(work, "runs/tiny/*/*/*/segments/*.json", "runs/tiny/*/*/*/logs/*.csv") == manifests
    p = load_params([work / "params.yaml"])
    for r in runs(p):
        for step in checkpoint_steps(p["train"]):
            read_meta(work / "results", step=step, **r.wildcards)  # raises if no manifest vouches for it
    assert {"rays", "landscape"} & _planned(work)
    [cmd] = _suggested(line)
    assert cmd == "villani tokenize --dataset tiny"
    assert _sh(work, cmd).returncode == 0
    out = _make_run(work)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert _files(work, "runs/tiny/*/*/*/ckpt/*/model.safetensors") == weights
    assert _nothing_to_do(work)


@pytest.mark.parametrize("config, key", [
    ("model: {config: {hidden_size: 65, num_heads: 4}}", "model.config.hidden_size: 65 is invalid"),
    ("model: {config: {attention_types: [[[global, local], 5]]}}", "model.config.attention_types"),
])
def test_a_model_the_model_class_refuses_stops_the_workflow_before_any_job(work, config, key):
    bad = work / "bad-model.yaml"
    bad.write_text(config + "\n")
    out = run([BIN / "snakemake", "-n", "--profile", "profiles/local", "--configfile", "params.yaml", str(bad)],
              cwd=work, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and key in text and "Job stats" not in text, text[-3000:]
    p = _sh(work, f"villani validate --params params.yaml --params {bad.name}")
    assert p.returncode == 2 and key in p.stderr and "\n" not in p.stderr.strip(), p.stderr
    bad.unlink()
