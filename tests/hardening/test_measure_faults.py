"""Faults around measurement: a killed job is never taken as complete; corrupt files are named."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import copy_repo, tiny_params
from tests.hardening.runs import train_tiny_run
from villani.plan import layout

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data_root):
    p = tiny_params()
    params, root = train_tiny_run(p, tmp_path_factory.mktemp("measure-faults"), tiny_data_root)
    return p, params, root


def _measure_cmd(params, root, step=24):
    return [sys.executable, "-m", "villani.cli", "measure", "--params", str(params), "--results", str(root),
            "--lam", "0.01", "--seed", "0", "--step", str(step), "--device", "cpu"]


@pytest.mark.slow  # 12 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_killed_measurement_leaves_no_json_and_rerun_completes(trained):
    p, params, root = trained
    out_json = layout.fmt(layout.MEASURE_JSON, root, step=24, **RUN)
    out_json.unlink(missing_ok=True)
    # killed mid-measurement: once it reports its first curvature phase (the JSON is written
    # after the last), whatever the machine's speed
    proc = subprocess.Popen(_measure_cmd(params, root) + ["--progress-interval", "0.001"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "| lanczos |" in line or "| hutchinson |" in line:
            break
    assert proc.poll() is None, "measurement finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert not out_json.exists(), "a killed measurement must not leave its completion marker"
    assert not list(root.rglob("*.tmp"))
    subprocess.run(_measure_cmd(params, root), check=True, capture_output=True)
    from villani.io.atomic import read_json

    rec = read_json(out_json)
    assert rec["step"] == 24 and rec["trace_L"]["num_probes"] == p["measure"]["num_probes"]


@pytest.mark.slow  # 63 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_snakemake_reruns_a_measurement_killed_mid_job(tmp_path):
    """Kill Snakemake and its job mid-measurement; the next invocation redoes that job."""
    import os

    work = copy_repo(tmp_path / "repo")
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    target = str(layout.fmt(layout.MEASURE_JSON, "results", dataset="tiny", variant="adamw", lam=0.0, seed=0, step=0))
    base = [str(BIN / "snakemake"), "--profile", "profiles/local", "--configfile", "tests/configs/tiny.yaml",
            "--cores", "1", target]
    proc = subprocess.Popen(base, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    log = work / "results/logs/measure/tiny/adamw/lam0.0/seed0/all.log"  # params.yaml: one measure job per run
    deadline = time.time() + 600
    while not log.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert log.exists(), "the measure job never started"
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (work / target).exists()
    # a SIGKILLed Snakemake leaves its lock; the user unlocks, as Snakemake's message says
    subprocess.run(base + ["--unlock"], cwd=work, env=env, check=True, capture_output=True)
    out = subprocess.run(base, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (work / target).exists()
    assert "measure" in out.stdout + out.stderr


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
@pytest.mark.slow  # 14 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_corrupt_measure_json_is_named_in_one_line(damage, trained, tmp_path):
    p, params, root = trained
    subprocess.run(_measure_cmd(params, root, step=12), check=True, capture_output=True)
    path = layout.fmt(layout.MEASURE_JSON, root, step=12, **RUN)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3] if damage == "truncate" else b"\x00\x01not json")
    from villani.io.results import measurements

    with pytest.raises(ValueError) as e:
        measurements(p, root, missing_ok=True)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "corrupt" in msg
