"""`villani measure` (and rays, landscape: every stage that evaluates a trained model)
refuses a checkpoint trained under other parameters, naming the keys."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import tiny_params
from villani.cli import main
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.schedule import segment_ends
from villani.training import train_segment


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data_root):
    p = tiny_params()
    root = tmp_path_factory.mktemp("provenance") / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    return p, root


@pytest.mark.parametrize("change, named", [
    ({"train": {"lr": 0.02}}, "train.lr: 0.01 there, 0.02 here"),
    ({"model": {"dropout": 0.1}}, "model.dropout: 0.0 there, 0.1 here"),
    ({"train": {"batch_size": 4, "eps": 1e-6}}, "train.batch_size: 8 there, 4 here; train.eps"),
])
def test_measure_refuses_a_checkpoint_trained_under_other_params(trained, tmp_path, capsys, change, named):
    p, root = trained
    params = tmp_path / "p.yaml"
    dump_yaml(tiny_params(**change), params)
    rc = main(["measure", "--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0",
               "--step", str(p["train"]["steps"]), "--device", "cpu", "--log-level", "WARNING"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "trained under other parameters" in err and named in err, err
    meta = layout.fmt(layout.CKPT_META, root, dataset="tiny", variant="adamw", lam=0.01, seed=0, step=p["train"]["steps"])
    assert str(meta) in err


def test_measure_accepts_its_own_checkpoint_and_a_change_it_does_not_depend_on(trained, tmp_path, capsys):
    p, root = trained
    params = tmp_path / "p.yaml"
    dump_yaml(tiny_params(train={"tensorboard": True}, figures={"dpi": 60}), params)
    rc = main(["measure", "--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0",
               "--step", "0", "--device", "cpu"])
    assert rc == 0, capsys.readouterr().err
