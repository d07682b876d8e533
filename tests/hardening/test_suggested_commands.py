"""Every command a message suggests, run as printed: a damaged, lost or stale file makes the
command that reads it stop in one line ending with the command that writes it again
(villani.plan.writers); the test runs that line through the shell, in the folder a user
works in, and the first command then succeeds — with the bytes the run had before, where
the file is a checkpoint.

The shell the suggested command runs in has another thread count (OMP_NUM_THREADS=2, on
2 cores) than the run was trained with: a retrain takes train.threads from the parameters
(the weights of 2 threads differ from 1 thread's on this model), so it writes the same
bytes. Figures-level messages (a deleted measurement Parquet under `villani figures`) and
the workflow's own recovery are tests/workflow/test_failed_jobs.py.

One module fixture: a work folder with params.yaml (the tiny values, one AdamW run: 24
steps, checkpoints 0, 6, 12, 18, 24, segments ending at 12 and 24) and results/ after
`villani plan`, `villani train … --all`, `villani measure … --all` and `villani bounds`;
each test damages its own copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.schedule import checkpoint_steps

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
OPTS = "--variant adamw --lam 0.01 --seed 0"
BIN = Path(sys.executable).parent


def _sh(work: Path, line: str, threads: int = 1) -> subprocess.CompletedProcess:
    """``line`` through bash in ``work``, with the venv's ``villani`` on PATH and ``threads``
    as the shell's OpenMP thread count."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", OMP_NUM_THREADS=str(threads),
               VILLANI_LOG_LEVEL="WARNING")
    return subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=900)


def _ok(work: Path, line: str, threads: int = 1) -> str:
    p = _sh(work, line, threads)
    assert p.returncode == 0, f"{line}: {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout


def _refused(work: Path, line: str) -> str:
    """The one error line of ``line``, which must exit 2."""
    p = _sh(work, line)
    err = p.stderr.strip()
    assert p.returncode == 2 and "\n" not in err and err.startswith("villani: error: "), (p.returncode, err[-3000:])
    return err


def _suggested(err: str) -> list[str]:
    """The ``villani …`` commands a message names, in backticks, in order."""
    return re.findall(r"`(villani [^`]+)`", err)


def _weights(root: Path) -> dict[int, str]:
    return {s: sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=s, **RUN))
            for s in checkpoint_steps(tiny_params()["train"])}


@pytest.fixture(scope="module")
def measured(tmp_path_factory, tiny_data_root):
    """(work folder, sha256 of each checkpoint's weights) — see the module doc."""
    work = tmp_path_factory.mktemp("work")
    dump_yaml(tiny_params(train={"lambdas": [0.01], "langevin": {"lambdas": []}}), work / "params.yaml")
    shutil.copytree(tiny_data_root / "data", work / "results" / "data")
    for line in ("villani plan", f"villani train {OPTS} --all", f"villani measure {OPTS} --all", "villani bounds"):
        _ok(work, line)
    return work, _weights(work / "results")


@pytest.fixture
def work(measured, tmp_path) -> Path:
    shutil.copytree(measured[0], tmp_path / "work")
    return tmp_path / "work"


def _path(work: Path, pattern: str, **wc) -> Path:
    return layout.fmt(pattern, work / "results", **{**RUN, **wc})


@pytest.mark.slow  # 45 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_truncated_weights_file_is_retrained_by_its_message_to_the_same_bytes(work, measured):
    """The issue's case: measure stops in one line naming the segment's command; run in a
    shell of another thread count it retrains the segment to the workflow's bytes."""
    weights = _path(work, layout.CKPT_WEIGHTS, step=24)
    weights.write_bytes(weights.read_bytes()[:1000])
    err = _refused(work, f"villani measure {OPTS} --step 24")
    assert f"{weights.relative_to(work)}: sha256 does not match" in err
    [cmd] = _suggested(err)
    assert cmd == f"villani train --dataset tiny {OPTS} --until 24", err
    _ok(work, cmd, threads=2)
    assert _weights(work / "results") == measured[1]
    _ok(work, f"villani measure {OPTS} --step 24")


@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_train_all_retrains_a_segment_whose_weights_fail_their_sha256(work, measured):
    """`--all` retrains every segment that is not intact: a truncated model.safetensors makes
    its segment not intact (before: "done under these parameters", the file left truncated)."""
    weights = _path(work, layout.CKPT_WEIGHTS, step=18)
    weights.write_bytes(weights.read_bytes()[:1000])
    out = _ok(work, f"villani train {OPTS} --all", threads=2)
    assert "segment 0→12: done under these parameters" in out and "segment 12→24: trained" in out, out
    assert _weights(work / "results") == measured[1]


@pytest.mark.slow  # 19 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_lost_manifest_is_brought_back_by_its_message(work):
    manifest = _path(work, layout.SEGMENT, step=12)
    manifest.unlink()
    err = _refused(work, f"villani measure {OPTS} --step 6")
    assert "no segment manifest lists it" in err
    [cmd] = _suggested(err)
    assert cmd == f"villani train --dataset tiny {OPTS} --all", err
    _ok(work, cmd)
    assert manifest.exists()
    _ok(work, f"villani measure {OPTS} --step 6")


@pytest.mark.slow  # 81 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_checkpoint_is_retrained_and_its_stale_measurement_measured_again(work, measured):
    """An edited checkpoint.json: its segment's command; the checkpoint is then not the one
    the measurement was taken on, and `villani bounds` names the command that measures it
    again."""
    meta_path = _path(work, layout.CKPT_META, step=12)
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps(dict(meta, train_loss=0.5), indent=2, sort_keys=True) + "\n")
    err = _refused(work, f"villani measure {OPTS} --step 12")
    [cmd] = _suggested(err)
    assert cmd == f"villani train --dataset tiny {OPTS} --until 12", err
    _ok(work, cmd, threads=2)
    assert _weights(work / "results") == measured[1]
    measured_again = []
    while _sh(work, "villani bounds").returncode:  # each checkpoint the retrain rewrote (0, 6, 12), one at a time
        err = _refused(work, "villani bounds")
        assert "the checkpoint was retrained or replaced since it was measured" in err
        [cmd] = _suggested(err)
        assert cmd.startswith(f"villani measure --dataset tiny {OPTS} --step ") and cmd not in measured_again, err
        _ok(work, cmd)
        measured_again.append(cmd)
    assert [int(c.split()[-1]) for c in measured_again] == [0, 6, 12]


@pytest.mark.slow  # 17 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_pruned_weights_are_brought_back_by_the_message_of_prune(work, measured):
    _ok(work, "villani prune")
    weights = _path(work, layout.CKPT_WEIGHTS, step=6)
    assert not weights.exists()
    err = _refused(work, f"villani measure {OPTS} --step 6")
    assert "deleted by `villani prune` after step 6 was measured" in err
    cmd = _suggested(err)[-1]  # what the message names: the command that pruned, then the one that brings it back
    assert cmd == f"villani train --dataset tiny {OPTS} --until 12", err
    _ok(work, cmd, threads=2)
    assert sha256_file(weights) == measured[1][6]


@pytest.mark.slow  # 38 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_or_lost_measurement_is_measured_again_by_its_message(work):
    path = _path(work, layout.MEASURE_JSON, step=18)
    rec = json.loads(path.read_text())
    path.write_text(json.dumps(dict(rec, val_ppl=1.0)))
    err = _refused(work, "villani bounds")
    assert "measurement was changed after it was written" in err
    [cmd] = _suggested(err)
    assert cmd == f"villani measure --dataset tiny {OPTS} --step 18", err
    _ok(work, cmd)
    _ok(work, "villani bounds")
    path.unlink()
    err = _refused(work, "villani bounds")
    assert "measurement not found" in err and err.endswith("(or the workflow)")
    _ok(work, _suggested(err)[0])
    _ok(work, "villani bounds")


@pytest.mark.slow  # 32 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_damaged_or_lost_token_data_is_written_again_by_its_message(work, measured):
    """A truncated train.parquet, then a lost tokenizer.json: `villani tokenize` for the
    dataset writes the same bytes, and training goes on where it stopped."""
    data = work / "results" / "data" / "tiny"
    before = {f.name: sha256_file(f) for f in data.iterdir()}
    train = data / "train.parquet"
    train.write_bytes(train.read_bytes()[:2000])
    err = _refused(work, f"villani measure {OPTS} --step 24")
    [cmd] = _suggested(err)
    assert cmd == "villani tokenize --dataset tiny", err
    _ok(work, cmd)
    assert {f.name: sha256_file(f) for f in data.iterdir()} == before
    _ok(work, f"villani measure {OPTS} --step 24")
    (data / "tokenizer.json").unlink()
    shutil.rmtree(_path(work, layout.WORK_DIR) / "done")  # no finished copy to restore: the segment trains
    err = _refused(work, f"villani train {OPTS} --until 24")
    assert "tokenizer file not found" in err
    [cmd] = _suggested(err)
    assert cmd == "villani tokenize --dataset tiny", err
    _ok(work, cmd)
    _ok(work, f"villani train {OPTS} --until 24")
    assert _weights(work / "results") == measured[1]


@pytest.mark.slow  # 36 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_other_parameters_name_the_command_that_retrains_under_them(work, measured):
    """A checkpoint trained under other parameters (train.lr edited): measure names the
    retrain of the run under the parameters asked, `--params` included; back under
    params.yaml, the second segment would continue from the other parameters' state and
    names the retrain of the run, which writes the first bytes again."""
    p = tiny_params(train={"lambdas": [0.01], "langevin": {"lambdas": []}, "lr": 0.02})
    dump_yaml(p, work / "lr.yaml")
    err = _refused(work, f"villani measure --params lr.yaml {OPTS} --step 24")
    assert "trained under other parameters (train.lr: 0.01 there, 0.02 here)" in err
    cmd = _suggested(err)[0]
    assert cmd == f"villani train --params lr.yaml --dataset tiny {OPTS} --all", err
    _ok(work, cmd)
    _ok(work, f"villani measure --params lr.yaml {OPTS} --step 24")
    err = _refused(work, f"villani train {OPTS} --until 24")
    assert "state.pt: written with other parameters" in err
    [cmd] = _suggested(err)
    assert cmd == f"villani train --dataset tiny {OPTS} --all", err
    _ok(work, cmd)
    assert _weights(work / "results") == measured[1]
    _ok(work, f"villani measure {OPTS} --step 24")


@pytest.mark.slow  # 28 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_ledger_is_written_again_by_the_message_of_claims_report(tree):
    """`villani claims-report` of an edited ledger (the synthetic results tree, bounds and
    ledger written): its line names the command that writes the ledger for that tree and
    those parameters; run as printed, the report reads it."""
    _, params, root = tree
    ledger = layout.fmt(layout.CLAIMS_JSON, root, dataset="tiny")
    doc = json.loads(ledger.read_text())
    ledger.write_text(json.dumps(dict(doc, counts_by_class={}), indent=2))
    report = f"villani claims-report --params {params} --results {root}"
    err = _refused(root.parent, report)
    assert "claims ledger was changed after it was written" in err
    [cmd] = _suggested(err)
    assert cmd == f"villani claims --params {params} --results {root} --dataset tiny", err
    _ok(root.parent, cmd)
    _ok(root.parent, report)
