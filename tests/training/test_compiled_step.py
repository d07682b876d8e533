"""The compiled training step (train.compile: on) on the CPU, with the tiny model: equal to
the eager step within a stated tolerance for every update rule, bit-identical to itself
across segments, a SIGTERM stop and its resume, the mode recorded in every checkpoint, the
same progress lines. A compiled step here is inductor's C++ kernels; on CUDA the same graphs
are captured as CUDA graphs (benchmarks/gpu_check.sh measures that path).

Durations on 2 shared cores: each compile of the tiny model's three graphs takes 10–50 s
(less when inductor's on-disk cache already holds them); the file runs in about 3–4 minutes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.schedule import segment_ends
from villani.runtime import progress as progress_mod
from villani.runtime.stop import Stopped
from villani.training import loop, step, train_segment

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)
STEPS = 24
# Relative agreement of the compiled step's per-step log with the eager one's over 24 steps
# of the tiny model in float32 (measured: at most 2.4e-6, adam_l2's gradient norm).
RTOL = 1e-5


def _root(tmp_path: Path, data_root: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(data_root / "data", root / "data")
    return root


def _params(compile_mode, **train):
    return tiny_params(train={"compile": compile_mode, "steps": STEPS, **train})


def _train(p, root, variant="adamw"):
    for end in segment_ends(p["train"]):
        train_segment(p, variant=variant, lam=0.01, seed=0, end=end, root=root, device="cpu", progress=False)


def _log(root, variant="adamw") -> pd.DataFrame:
    logs = [pd.read_csv(f) for f in sorted(layout.fmt(layout.SEGMENT_LOG, root, step=STEPS, **{**RUN, "variant": variant})
                                           .parent.glob("seg*.csv"))]
    return pd.concat(logs, ignore_index=True)


def _weights(root, step_=STEPS) -> str:
    return sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=step_, **RUN))


def _meta(root, step_, variant="adamw") -> dict:
    ckpt = layout.fmt(layout.CKPT_DIR, root, step=step_, **{**RUN, "variant": variant})
    return json.loads((ckpt / "checkpoint.json").read_text())


def test_step_mode():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [step.step_mode(s, cpu) for s in ("auto", "on", "off", True, False)] == [
        "eager", "compiled", "eager", "compiled", "eager"]
    assert [step.step_mode(s, cuda) for s in ("auto", "on", "off")] == ["captured", "captured", "eager"]
    with pytest.raises(ValueError, match=r"train.compile: 'fast' is not one of auto, on, off"):
        step.step_mode("fast", cpu)


@pytest.mark.parametrize("variant", ["adamw", "adam_l2", "langevin", "adamw_noise"])
@pytest.mark.slow  # 21 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_compiled_equals_eager_within_tolerance(variant, tmp_path, tiny_data_root):
    """Every update rule, 24 steps in two segments: loss, gradient norm and ‖θ‖² of every step
    within RTOL of the eager step's; lr and the skipped column exactly."""
    eager, compiled = _root(tmp_path / "eager", tiny_data_root), _root(tmp_path / "compiled", tiny_data_root)
    _train(_params("off"), eager, variant)
    _train(_params("on"), compiled, variant)
    a, b = _log(eager, variant), _log(compiled, variant)
    assert list(a["step"]) == list(b["step"]) == list(range(1, STEPS + 1))
    assert list(a["lr"]) == list(b["lr"]) and list(a["skipped"]) == list(b["skipped"]) == [0] * STEPS
    for col in ("loss", "grad_norm", "theta_sq_norm"):
        rel = ((a[col] - b[col]).abs() / a[col].abs()).max()
        assert rel <= RTOL, (variant, col, rel)
    assert _meta(eager, STEPS, variant)["train_step"] == "eager"
    assert _meta(compiled, STEPS, variant)["train_step"] == "compiled"


@pytest.mark.slow  # 10 s on 2 idle cores: past test-fast's 3-minute budget
def test_compiled_resume_after_sigterm_is_bit_identical(tmp_path, tiny_data_root, monkeypatch, caplog):
    """Compiled: one segment vs two segments vs a SIGTERM at step 7 (work state written
    there, Stopped raised) and the rerun: the same weights bit for bit, the same per-step
    log but for the timings; a progress line of the compiled run has the eager run's fields."""
    one = _root(tmp_path / "one", tiny_data_root)
    p1 = _params("on", segments=1, checkpoints={"count": 1}, save_every=100)
    monkeypatch.setattr(progress_mod, "_configured_interval", 0.05)  # a line every 0.05 s
    with caplog.at_level(logging.INFO, logger="villani"):
        _train(p1, one)
    lines = [r.getMessage() for r in caplog.records if "loss=" in r.getMessage() and "| done |" not in r.getMessage()]
    assert lines and all(f in lines[-1] for f in ("/24", "loss=", "lr=", "tokens/s=", "‖θ‖²=", "ETA")), lines[-1:]

    two = _root(tmp_path / "two", tiny_data_root)
    _train(_params("on"), two)
    assert _weights(one) == _weights(two)

    stopped = _root(tmp_path / "stopped", tiny_data_root)
    real = step.TrainStep.__call__

    def sigterm_at_7(self):
        row = real(self)
        if self.run.step == 7:
            os.kill(os.getpid(), signal.SIGTERM)  # handled by villani.runtime.stop.deferred: stop at this boundary
        return row

    monkeypatch.setattr(step.TrainStep, "__call__", sigterm_at_7)
    with pytest.raises(Stopped, match="work state saved at step 7"):
        train_segment(p1, end=STEPS, root=stopped, device="cpu", progress=False, **{k: RUN[k] for k in
                                                                                    ("variant", "lam", "seed")})
    monkeypatch.setattr(step.TrainStep, "__call__", real)
    manifest = train_segment(p1, end=STEPS, root=stopped, device="cpu", progress=False,
                             **{k: RUN[k] for k in ("variant", "lam", "seed")})
    assert manifest["resumed_from_work_step"] == 7
    assert _weights(stopped) == _weights(one)
    timing = ["tokens_per_s", "wall_clock_s"]
    assert _log(stopped).drop(columns=timing).equals(_log(one).drop(columns=timing))


@pytest.mark.slow  # 10 s on 2 idle cores: past test-fast's 3-minute budget
def test_a_segment_resumes_in_the_other_mode_and_records_it(tmp_path, tiny_data_root, caplog):
    """Segment 1 eager, segment 2 compiled: the optimizer state carries over (the compiled
    segment's log equals an all-eager run's within RTOL), a warning names the switch, each
    checkpoint records its mode."""
    mixed, eager = _root(tmp_path / "mixed", tiny_data_root), _root(tmp_path / "eager", tiny_data_root)
    p_off, p_on = _params("off"), _params("on")
    first, second = segment_ends(p_off["train"])
    kw = dict(root=mixed, device="cpu", progress=False, **{k: RUN[k] for k in ("variant", "lam", "seed")})
    train_segment(p_off, end=first, **kw)
    with caplog.at_level(logging.WARNING, logger="villani"):
        train_segment(p_on, end=second, **kw)
    assert any("in the compiled step from a state of the eager step" in r.getMessage() for r in caplog.records)
    _train(p_off, eager)
    a, b = _log(eager), _log(mixed)
    for col in ("loss", "grad_norm", "theta_sq_norm"):
        assert ((a[col] - b[col]).abs() / a[col].abs()).max() <= RTOL, col
    assert [_meta(mixed, s)["train_step"] for s in (first, second)] == ["eager", "compiled"]


def test_rows_held_on_the_device_log_the_same_and_stop_at_the_nonfinite_step(tmp_path, tiny_data_root, monkeypatch):
    """The CUDA policy on the CPU (rows reach the host every 8 steps and at boundaries): the
    per-step log and weights equal the step-by-step run's; a NaN loss at step 10 stops with
    the message of step 10 and the last good checkpoint, the log holds steps 1–9 only (the
    steps computed after it are never logged), no checkpoint after it is written."""
    p = _params("off", segments=1, checkpoints={"count": 2}, save_every=100)
    ref = _root(tmp_path / "ref", tiny_data_root)
    _train(p, ref)
    monkeypatch.setitem(step.ROWS_PER_SYNC, "cpu", 8)
    held = _root(tmp_path / "held", tiny_data_root)
    _train(p, held)
    timing = ["tokens_per_s", "wall_clock_s"]
    assert _log(held).drop(columns=timing).equals(_log(ref).drop(columns=timing))
    assert _weights(held) == _weights(ref)

    real_ce = loop._SegmentState.ce

    def nan_at_step_10(self, x):
        out = real_ce(self, x)
        return out * float("nan") if self.step == 9 and self.model.training else out

    monkeypatch.setattr(loop._SegmentState, "ce", nan_at_step_10)
    bad = _root(tmp_path / "bad", tiny_data_root)
    with pytest.raises(loop.TrainingDiverged, match=r"loss is nan at step 10; last good checkpoint: .*/ckpt/step0000000"):
        _train(p, bad)
    partial = layout.fmt(layout.SEGMENT_LOG_PARTIAL, bad, step=STEPS, **RUN)
    assert list(pd.read_csv(partial)["step"]) == list(range(1, 10))
    assert not layout.fmt(layout.CKPT_DIR, bad, step=12, **RUN).exists()


# --------------------------------------------------------------------------- train.compile: auto falls back
def _auto_compiles_here(monkeypatch):
    """`auto` resolved as on CUDA (the compiled step), here on the CPU: the fallback's path."""
    real = step.step_mode
    monkeypatch.setattr(loop, "step_mode", lambda s, d: "compiled" if s == "auto" else real(s, d))


def _fallback_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "train.compile: auto" in r.getMessage()]


def test_auto_undoes_a_step_whose_update_failed_to_compile(tmp_path, tiny_data_root, monkeypatch, caplog):
    """The forward and backward graphs compile and run, the update graph fails to compile
    (a dynamo error, forced at its first call), after the step drew its gradient noise
    (adamw_noise): the step is undone — noise stream included — and taken again eagerly,
    so the weights equal the eager run's bit for bit."""
    from torch._dynamo.exc import Unsupported

    noise = {"adamw_noise": {"lambdas": [0.01]}, "segments": 1, "checkpoints": {"count": 1}}
    eager = _root(tmp_path / "eager", tiny_data_root)
    _train(_params("off", **noise), eager, "adamw_noise")
    _auto_compiles_here(monkeypatch)
    real_init = step._Graphs.__init__

    def failing_update(self, owner, captured):
        real_init(self, owner, captured)

        def update(*args):
            raise Unsupported("forced: the update graph does not compile")
        self.update = update

    monkeypatch.setattr(step._Graphs, "__init__", failing_update)
    auto = _root(tmp_path / "auto", tiny_data_root)
    with caplog.at_level(logging.WARNING, logger="villani"):
        _train(_params("auto", **noise), auto, "adamw_noise")
    torch._dynamo.reset()
    lines = _fallback_lines(caplog)
    assert len(lines) == 1 and "Unsupported: forced: the update graph does not compile" in lines[0], lines
    run = {**RUN, "variant": "adamw_noise"}
    weights = [sha256_file(layout.fmt(layout.CKPT_WEIGHTS, r, step=STEPS, **run)) for r in (auto, eager)]
    assert weights[0] == weights[1]
    assert _meta(auto, STEPS, "adamw_noise")["train_step"] == "eager"


# inductor keeps the compiler it looked up (a monkeypatched one included): one test forces the failure
@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_compiler_failure_is_one_line_with_on_and_falls_back_with_auto(tmp_path, tiny_data_root, monkeypatch,
                                                                          caplog):
    """Inductor cannot build its kernels (no C++ compiler at the named path, its caches off).
    train.compile: on — a one-line ValueError that names the key and the way out. auto, where
    the compiled step is chosen (as on CUDA): the run finishes in the eager step, one warning
    line names the reason, the weights are the eager run's bit for bit, and every checkpoint
    records the eager step."""
    import torch._inductor.config as inductor_config

    p_auto, p_off = (_params(c, segments=1, checkpoints={"count": 2}) for c in ("auto", "off"))
    eager = _root(tmp_path / "eager", tiny_data_root)
    _train(p_off, eager)
    monkeypatch.setattr(inductor_config.cpp, "cxx", ("/nonexistent/g++",))
    monkeypatch.setattr(inductor_config, "force_disable_caches", True)
    torch._dynamo.reset()
    root = _root(tmp_path / "on", tiny_data_root)
    with pytest.raises(ValueError, match=r"^train.compile: torch.compile failed on cpu \(.*\); set train.compile: off$"):
        _train(_params("on", segments=1, checkpoints={"count": 1}), root)
    torch._dynamo.reset()
    _auto_compiles_here(monkeypatch)
    auto = _root(tmp_path / "auto", tiny_data_root)
    with caplog.at_level(logging.WARNING, logger="villani"):
        _train(p_auto, auto)
    torch._dynamo.reset()
    lines = _fallback_lines(caplog)
    assert len(lines) == 1 and "the compiled step failed at step 1 on cpu" in lines[0], lines
    assert "C++ compiler" in lines[0] and "goes on in the eager step" in lines[0]
    assert _weights(auto) == _weights(eager)
    assert {_meta(auto, s)["train_step"] for s in (12, STEPS)} == {"eager"}
