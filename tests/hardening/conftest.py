"""The two results trees the hardening tests damage, each built once per module and copied
for every test: a real tiny run (`trained`, `copy`) and a synthetic results tree with its
bounds, figures and claims ledger (`pristine`, `tree`)."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import build_results
from tests.hardening.runs import train_tiny_run
from villani.plan import layout
from villani.plan.config import dump_yaml


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data_root):
    """(params, params file, root): the tiny run (24 steps, checkpoints 0, 6, 12, 18, 24,
    segments ending at 12 and 24) trained at λ = 0.01, seed 0."""
    p = tiny_params()
    params, root = train_tiny_run(p, tmp_path_factory.mktemp("trained"), tiny_data_root)
    return p, params, root


@pytest.fixture()
def copy(trained, tmp_path):
    """A fresh copy of the trained results for one test to damage."""
    p, params, root = trained
    shutil.copytree(root, tmp_path / "results")
    return p, params, tmp_path / "results"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """(params, params file, root): a synthetic results tree with two seeds, its bounds,
    figures and claims ledger."""
    from villani.bounds.table import write_bounds
    from villani.claims.reporting.ledger import write_claims
    from villani.figures import render_all

    p = tiny_params(train={"seeds": [0, 1]}, figures={"formats": ["png"], "dpi": 50})
    tmp = tmp_path_factory.mktemp("synthetic")
    root = build_results(tmp / "results", p)
    stats = layout.fmt(layout.DATA_STATS, root, dataset=p["data"]["name"])  # the baseline the ledger reads
    stats.write_text(json.dumps(dict(json.loads(stats.read_text()),
                                     baselines={"unigram": {"val_ppl": 250.0, "val_loss": math.log(250.0)}})))
    write_bounds(p, root)
    render_all(p, root)
    write_claims(p, root)
    dump_yaml(p, tmp / "p.yaml")
    return p, tmp / "p.yaml", root


@pytest.fixture
def tree(pristine, tmp_path):
    """A fresh copy of the pristine tree for one test to damage."""
    p, params, root = pristine
    shutil.copytree(root, tmp_path / "results")
    return p, params, tmp_path / "results"
