"""A work state that loads but is not what a segment writes is set aside with a one-line
warning and the segment restarts from its last checkpoint — never stuck on it."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch

from tests.conftest import tiny_params
from villani.io.atomic import sha256_file
from villani.plan import layout
from villani.plan.schedule import segment_ends
from villani.training import loop, train_segment

RUN = dict(dataset="tiny", variant="adamw", lam=0.01, seed=0)


def _train_all(p, root):
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    return sha256_file(layout.fmt(layout.CKPT_WEIGHTS, root, step=p["train"]["steps"], **RUN))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory, tiny_data_root):
    """(params, reference final sha, a results tree whose first segment was interrupted
    after its work state at step 5 was written)."""
    p = tiny_params()
    tmp = tmp_path_factory.mktemp("work-state")
    ref = tmp / "ref"
    shutil.copytree(tiny_data_root / "data", ref / "data")
    sha = _train_all(p, ref)
    root = tmp / "interrupted"
    shutil.copytree(tiny_data_root / "data", root / "data")
    step = loop._SegmentState.train_step

    def stop_at_8(self):
        if self.step == 7:
            raise KeyboardInterrupt
        return step(self)

    loop._SegmentState.train_step = stop_at_8
    try:
        with pytest.raises(KeyboardInterrupt):
            train_segment(p, end=segment_ends(p["train"])[0], root=root, device="cpu", progress=False, **{
                k: RUN[k] for k in ("variant", "lam", "seed")})
    finally:
        loop._SegmentState.train_step = step
    work = layout.fmt(layout.WORK_DIR, root, **RUN) / "state.pt"
    assert torch.load(work, weights_only=True)["step"] == 5
    return p, sha, root


def _list(state):
    return [1, 2, 3]


def _wrong_shape(state):
    name = next(iter(state["model"]))
    state["model"][name] = torch.zeros(3, 3)
    return state


def _no_rng(state):
    del state["noise_rng"]
    return state


def _step_as_text(state):
    state["step"] = "5"
    return state


def _optimizer_of_another_model(state):  # passes the structural check, fails on restore
    state["optimizer"]["param_groups"] = []
    return state


@pytest.mark.parametrize("damage, fragment", [
    (_list, "(top level): a list is invalid"), (_wrong_shape, "is invalid (expected a tensor"),
    (_no_rng, "noise_rng"), (_step_as_text, 'step: "5" is invalid'), (_optimizer_of_another_model, "cannot be restored"),
])
def test_ill_formed_work_state_is_set_aside_and_training_recovers(interrupted, tmp_path, caplog, damage, fragment):
    p, ref_sha, pristine = interrupted
    root = tmp_path / "results"
    shutil.copytree(pristine, root)
    work = layout.fmt(layout.WORK_DIR, root, **RUN) / "state.pt"
    torch.save(damage(torch.load(work, weights_only=True)), work)
    with caplog.at_level(logging.WARNING, logger="villani.training.loop"):
        assert _train_all(p, root) == ref_sha  # bit-identical to a run never interrupted
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert warnings[0].startswith(f"{work}: ") and fragment in warnings[0], warnings[0]
    assert "restarts from its checkpoint at step 0" in warnings[0]
    assert (work.parent / "state.invalid.pt").exists() and not work.exists()
