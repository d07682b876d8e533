"""A finished segment run again (a retried SLURM group job: Snakemake deletes every member's
outputs, then reruns them all) is restored from work/done/, not retrained, and leaves a later
segment's work state alone."""

from __future__ import annotations

import shutil

import torch

from tests.conftest import tiny_params
from villani.plan import layout
from villani.plan.digest import run_digest
from villani.plan.schedule import segment_ends
from villani.training import train_segment
from villani.training.segments import restore_finished

RUN = dict(variant="adamw", lam=0.01, seed=0)
IDENT = dict(dataset="tiny", **RUN)


def test_finished_segment_is_restored_not_retrained(tmp_path, tiny_data_root):
    torch.set_num_threads(1)
    p = tiny_params(train={"steps": 20, "segments": 2, "save_every": 5, "checkpoints": {"count": 2}})
    root = tmp_path / "r"
    shutil.copytree(tiny_data_root / "data", root / "data")
    first = segment_ends(p["train"])[0]
    manifest = train_segment(p, end=first, root=root, device="cpu", progress=False, **RUN)
    outputs = [layout.fmt(f, root, step=first, **IDENT) for f in (layout.SEGMENT, layout.SEGMENT_LOG)]
    before = {o: o.read_bytes() for o in outputs}
    ckpt = layout.fmt(layout.CKPT_WEIGHTS, root, step=first, **IDENT)
    written_at = ckpt.stat().st_mtime_ns
    for o in outputs:  # what Snakemake does to a failed group's members before it reruns them
        o.unlink()
    later = layout.fmt(layout.WORK_DIR, root, **IDENT) / "state.pt"  # the next segment's work state
    later.write_bytes(b"work state of the next segment")

    again = train_segment(p, end=first, root=root, device="cpu", progress=False, **RUN)
    assert again == manifest
    assert {o: o.read_bytes() for o in outputs} == before
    assert ckpt.stat().st_mtime_ns == written_at  # not retrained
    assert later.read_bytes() == b"work state of the next segment"

    # other parameters, or a checkpoint that no longer matches: trained again
    other = run_digest(tiny_params(train={"steps": 20, "segments": 2, "save_every": 5, "checkpoints": {"count": 2},
                                          "lr": 0.5}), **RUN)
    assert restore_finished(root, IDENT, first, other, [0, first]) is None
    ckpt.write_bytes(ckpt.read_bytes()[:-8] + b"\0" * 8)
    assert restore_finished(root, IDENT, first, manifest["digest"], [0, first]) is None
