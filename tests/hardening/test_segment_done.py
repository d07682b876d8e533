"""A segment is done only if it was trained under the parameters asked now, and the check of
a checkpoint against its segment manifest fails closed (issue 40, items 1 and 3).

Driven as a user meets it: `villani train --all` (what `dvc repro` runs) after editing
train.lr in the parameter file; a truncated, deleted or edited segment manifest or
checkpoint.json, then `villani measure` and `villani train --all`. One tiny run (24 steps,
checkpoints 0, 6, 12, 18, 24, segments ending at 12 and 24), trained once per module; each
test damages its own copy."""

from __future__ import annotations

import json

import pytest


from tests.conftest import tiny_params
from villani.cli import main
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.runs import Run

RUN = Run("tiny", "adamw", 0.01, 0)
TRAIN = ["--lam", "0.01", "--seed", "0", "--device", "cpu", "--log-level", "WARNING"]


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([*argv, *TRAIN])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err.strip()


def _stamps(root) -> dict:
    """checkpoint.json of every checkpoint → its bytes (a retrained checkpoint has a new written_at)."""
    return {s: RUN.path(layout.CKPT_META, root, step=s).read_bytes() for s in (0, 6, 12, 18, 24)}


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_lr_retrains_every_segment_and_the_record_says_so(copy, tmp_path, capsys):
    p, _, root = copy
    before = _stamps(root)
    edited = tmp_path / "edited.yaml"
    dump_yaml(tiny_params(train={"lr": 0.012}), edited)
    rc, out, err = _cli(capsys, "train", "--params", str(edited), "--results", str(root), "--all")
    assert rc == 0, err
    assert out.splitlines() == ["segment 0→12: trained; checkpoints [0, 6, 12]",
                                "segment 12→24: trained; checkpoints [18, 24]"]
    after = _stamps(root)
    assert all(after[s] != before[s] for s in before)
    for s in before:
        assert json.loads(after[s])["train_params"]["train.lr"] == 0.012
    manifest = json.loads(RUN.path(layout.SEGMENT, root, step=24).read_text())
    assert manifest["train_params"]["train.lr"] == 0.012 and manifest["start_checkpoint"]["step"] == 12
    rc, out, err = _cli(capsys, "measure", "--params", str(edited), "--results", str(root), "--step", "24")
    assert rc == 0, err
    rec = json.loads(RUN.path(layout.MEASURE_JSON, root, step=24).read_text())
    assert rec["train_params"]["train.lr"] == 0.012
    assert rec["weights_sha256"] == json.loads(after[24])["weights_sha256"]
    # asked again under the same parameters: nothing is trained
    rc, out, err = _cli(capsys, "train", "--params", str(edited), "--results", str(root), "--all")
    assert rc == 0 and "trained;" not in out and out.count("done under these parameters") == 2, (out, err)
    assert _stamps(root) == after


def test_the_old_checkpoint_under_the_edited_lr_is_refused_by_measure(copy, tmp_path, capsys):
    """Before the retrain (a `villani measure` run by hand): one line naming the key."""
    _, _, root = copy
    edited = tmp_path / "edited.yaml"
    dump_yaml(tiny_params(train={"lr": 0.012}), edited)
    rc, _, err = _cli(capsys, "measure", "--params", str(edited), "--results", str(root), "--step", "12")
    assert rc == 2 and "\n" not in err and "train.lr: 0.01 there, 0.012 here" in err, err


def test_a_truncated_manifest_is_not_done_and_its_checkpoints_are_refused(copy, capsys):
    _, params, root = copy
    seg = RUN.path(layout.SEGMENT, root, step=12)
    seg.write_bytes(seg.read_bytes()[:40])
    rc, _, err = _cli(capsys, "measure", "--params", str(params), "--results", str(root), "--step", "6")
    assert rc == 2 and "\n" not in err, err
    assert f"checkpoint.json: cannot be checked: its segment manifest cannot be read ({seg}: segment manifest is " \
           "corrupt or truncated" in err
    assert not RUN.path(layout.MEASURE_JSON, root, step=6).exists()
    rc, out, err = _cli(capsys, "train", "--params", str(params), "--results", str(root), "--all")
    assert rc == 0, err
    assert "segment 0→12: trained" in out and "segment 12→24: done under these parameters" in out, out
    assert f"{seg}: segment manifest is corrupt or truncated" in err  # why it was trained again
    rc, _, err = _cli(capsys, "measure", "--params", str(params), "--results", str(root), "--step", "6")
    assert rc == 0, err


def test_a_deleted_manifest_never_disables_the_check_of_an_edited_checkpoint(copy, capsys):
    """The old remedy (delete the manifest) no longer opens a window: an edited train_loss
    with no manifest is refused, and `train --all` retrains the segment."""
    _, params, root = copy
    meta_path = RUN.path(layout.CKPT_META, root, step=12)
    true_loss = json.loads(meta_path.read_text())["train_loss"]
    meta_path.write_text(json.dumps(dict(json.loads(meta_path.read_text()), train_loss=1.0), indent=2))
    RUN.path(layout.SEGMENT, root, step=12).unlink()
    rc, _, err = _cli(capsys, "measure", "--params", str(params), "--results", str(root), "--step", "12")
    assert rc == 2 and "\n" not in err, err
    assert f"{meta_path}: cannot be checked: no segment manifest lists it" in err and "--all`" in err
    rc, out, err = _cli(capsys, "train", "--params", str(params), "--results", str(root), "--all")
    assert rc == 0 and "segment 0→12: trained" in out, (out, err)
    rc, _, err = _cli(capsys, "measure", "--params", str(params), "--results", str(root), "--step", "12")
    assert rc == 0, err
    assert json.loads(RUN.path(layout.MEASURE_JSON, root, step=12).read_text())["train_loss"] == true_loss


def test_an_edited_checkpoint_json_makes_its_segment_not_done(copy, capsys):
    _, params, root = copy
    meta_path = RUN.path(layout.CKPT_META, root, step=18)
    meta_path.write_text(json.dumps(dict(json.loads(meta_path.read_text()), train_loss=1.0), indent=2))
    rc, out, err = _cli(capsys, "train", "--params", str(params), "--results", str(root), "--all")
    assert rc == 0, err
    assert "segment 0→12: done under these parameters" in out and "segment 12→24: trained" in out, out
    assert f"{meta_path}: missing, or not the checkpoint.json seg0000024.json recorded" in err
    assert json.loads(meta_path.read_text())["train_loss"] != 1.0
