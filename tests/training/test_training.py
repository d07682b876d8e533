"""Training: loss goes down, determinism, bit-identical resume across segments and kills."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.schedule import checkpoint_steps, segment_ends
from villani.training import TrainingDiverged, train_segment
from villani.training.checkpoint import read_meta


def _root_with_data(tmp_path: Path, data_root: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(data_root / "data", root / "data")
    return root


def _train_all(p, root, variant="adamw", lam=0.01, seed=0):
    for end in segment_ends(p["train"]):
        train_segment(p, variant=variant, lam=lam, seed=seed, end=end, root=root, device="cpu", progress=False)
    return sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, dataset=p["data"]["name"], variant=variant,
                                  lam=lam, seed=seed, step=p["train"]["steps"]))


def test_loss_decreases(tmp_path, tiny_data_root):
    p = tiny_params(train={"steps": 60, "segments": 1, "checkpoints": {"count": 1}})
    root = _root_with_data(tmp_path, tiny_data_root)
    _train_all(p, root)
    log = pd.read_csv(layout.fmt(layout.SEGMENT_LOG, root, dataset="tiny", variant="adamw", lam=0.01, seed=0, step=60))
    assert list(log["step"]) == list(range(1, 61))
    assert log["loss"].tail(10).mean() < log["loss"].head(10).mean() - 0.5


def test_same_seed_same_weights_other_seed_differs(tmp_path, tiny_data_root):
    p = tiny_params()
    a = _train_all(p, _root_with_data(tmp_path / "a", tiny_data_root))
    b = _train_all(p, _root_with_data(tmp_path / "b", tiny_data_root))
    c = _train_all(p, _root_with_data(tmp_path / "c", tiny_data_root), seed=1)
    assert a == b
    assert a != c


def test_segmented_run_equals_uninterrupted(tmp_path, tiny_data_root):
    one = tiny_params(train={"segments": 1})
    two = tiny_params(train={"segments": 2})
    assert len(segment_ends(two["train"])) == 2
    for variant in ("adamw", "adamw_noise", "langevin"):
        a = _train_all(one, _root_with_data(tmp_path / f"one-{variant}", tiny_data_root), variant=variant)
        b = _train_all(two, _root_with_data(tmp_path / f"two-{variant}", tiny_data_root), variant=variant)
        assert a == b, variant


def test_checkpoint_metadata(tmp_path, tiny_data_root):
    p = tiny_params(train={"decay_params": "matrices", "keep_state": "all"})
    root = _root_with_data(tmp_path, tiny_data_root)
    _train_all(p, root, lam=0.01)
    for step in checkpoint_steps(p["train"]):
        meta = read_meta(root, "tiny", "adamw", 0.01, 0, step)
        assert meta["step"] == step
        assert meta["tokens_seen"] == step * 8 * 32
        assert meta["lam"] == 0.01 and meta["seed"] == 0 and meta["decay_mode"] == "decoupled"
        assert meta["decay_params"] == "matrices"
        assert all(".bias" not in n for n in meta["decayed_params"])
        assert meta["theta_sq_norm"] > 0 and meta["train_loss"] > 0


def test_weight_decay_shrinks_norm(tmp_path, tiny_data_root):
    p = tiny_params(train={"steps": 40, "lr": 0.01, "checkpoints": {"count": 1}, "segments": 1})
    norms = {}
    for lam in (0.0, 0.01):
        root = _root_with_data(tmp_path / str(lam), tiny_data_root)
        p2 = tiny_params(train={"steps": 40, "lr": 0.01, "checkpoints": {"count": 1}, "segments": 1,
                                "lambdas": [0.0, 0.01]})
        _train_all(p2, root, lam=lam)
        norms[lam] = read_meta(root, "tiny", "adamw", lam, 0, 40)["theta_sq_norm"]
    del p
    assert norms[0.01] < norms[0.0]


def test_coupled_mode_differs_from_decoupled(tmp_path, tiny_data_root):
    a = _train_all(tiny_params(), _root_with_data(tmp_path / "a", tiny_data_root))
    b = _train_all(tiny_params(train={"decay_mode": "coupled"}), _root_with_data(tmp_path / "b", tiny_data_root))
    assert a != b


def test_nonfinite_loss_stops_with_step_and_checkpoint(tmp_path, tiny_data_root, monkeypatch):
    p = tiny_params(train={"lr": 1e6, "grad_clip": None, "warmup_steps": 0})
    root = _root_with_data(tmp_path, tiny_data_root)
    with pytest.raises(TrainingDiverged, match=r"at step \d+; last good checkpoint: .*/ckpt/step0000000"):
        _train_all(p, root)


def test_langevin_temperature_rules():
    from villani.training.loop import langevin_beta

    assert langevin_beta(None, 0.01, 1e-3, 0.05) == pytest.approx(100.0)
    assert langevin_beta(None, 0.0, 1e-3, 0.05) is None
    assert langevin_beta(7.0, 0.0, 1e-3, 0.05) == 7.0
    # Table I: β⁻¹ = ησ²/(2d), σ² = std²·d  →  β = 2/(η·std²); step √(2η/β) = η·std
    beta = langevin_beta("table1", 0.01, 1e-3, 0.05)
    assert beta == pytest.approx(2 / (1e-3 * 0.05**2))
    assert (2 * 1e-3 / beta) ** 0.5 == pytest.approx(1e-3 * 0.05)
    assert langevin_beta("table1", 0.01, 1e-3, 0.0) is None


def test_state_kept_only_at_segment_ends_by_default(tmp_path, tiny_data_root):
    p = tiny_params()
    root = _root_with_data(tmp_path, tiny_data_root)
    _train_all(p, root)
    ends = set(segment_ends(p["train"]))
    for step in checkpoint_steps(p["train"]):
        state = layout.fmt(layout.CKPT_STATE, root, dataset="tiny", variant="adamw", lam=0.01, seed=0, step=step)
        assert state.exists() == (step in ends), step
        read_meta(root, "tiny", "adamw", 0.01, 0, step)  # verifies whatever is there


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_the_cpu_thread_count_is_the_parameters_and_recorded(tmp_path, tiny_data_root, caplog):
    """train.threads sets the CPU threads whatever torch had (the shell's count): the same
    weights at threads 1 from a process set to 2; other weights at train.threads 2 (the
    count is part of the arithmetic); each checkpoint records it; a segment continued under
    another count says so in one warning."""
    import logging

    import torch

    p1, p2 = tiny_params(train={"threads": 1}), tiny_params(train={"threads": 2})
    before = torch.get_num_threads()
    try:
        one = _train_all(p1, _root_with_data(tmp_path / "one", tiny_data_root))
        torch.set_num_threads(2)  # what OMP_NUM_THREADS=2 or --threads 2 leaves
        shell = _train_all(p1, _root_with_data(tmp_path / "shell", tiny_data_root))
        two_root = _root_with_data(tmp_path / "two", tiny_data_root)
        two = _train_all(p2, two_root)
        mixed = _root_with_data(tmp_path / "mixed", tiny_data_root)
        first, second = segment_ends(p1["train"])
        train_segment(p1, variant="adamw", lam=0.01, seed=0, end=first, root=mixed, device="cpu", progress=False)
        with caplog.at_level(logging.WARNING, logger="villani"):
            train_segment(p2, variant="adamw", lam=0.01, seed=0, end=second, root=mixed, device="cpu", progress=False)
    finally:
        torch.set_num_threads(before)
    assert shell == one != two
    assert read_meta(two_root, dataset="tiny", variant="adamw", lam=0.01, seed=0, step=24)["cpu_threads"] == 2
    assert [r.getMessage() for r in caplog.records if "trained otherwise" in r.getMessage()] == [
        "train adamw λ=0.01 seed=0: continues from the checkpoint at step 12 trained otherwise (cpu_threads 1 there, "
        "2 here): from here on equal to a run trained in one go within rounding, not bit for bit"]
