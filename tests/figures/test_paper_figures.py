"""The cross-dataset figures (villani.figures.paper) on a synthetic results tree of two
datasets with different schedules and update rules: drawn at print width with every text
≥ 7 pt (save_figure refuses anything else), one panel per corpus, one legend entry per run
group of either corpus, and the pooled PAC-Bayes numbers over both."""

from __future__ import annotations

import matplotlib.image
import pandas as pd
import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import build_results
from villani.figures.style import DOUBLE
from villani.plan.config import dataset_names, dataset_params, resolve

FIGURES = ["fig5_training_curves", "fig6_pac_bayes"]


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    from villani.bounds.table import write_bounds
    from villani.figures.paper import render_paper

    doc = dict(tiny_params(train={"seeds": [0, 1]}, figures={"formats": ["png"], "dpi": 50}))
    doc["datasets"] = {"a": {"train": {"adam_l2": {"lambdas": [0.01]}}},
                       "b": {"train": {"steps": 16, "checkpoints": {"count": 2}, "segments": 1}}}
    doc = resolve(doc, source="two")
    root = tmp_path_factory.mktemp("paper-figures")
    for ds in dataset_names(doc):
        p = dataset_params(doc, ds)
        build_results(root, p, cost=False, rays=False, landscape=False)
        write_bounds(p, root)
    return doc, root, render_paper(doc, root, names=FIGURES)


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_cross_dataset_figures_are_print_width_with_both_corpora(two):
    doc, root, written = two
    for name in FIGURES:
        png = root / "figures/paper/a+b" / f"{name}.png"
        assert str(png) in written
        h, w = matplotlib.image.imread(png).shape[:2]
        assert w == round(DOUBLE * 50)
    curves = pd.read_csv(root / "figures/paper/a+b/fig5_training_curves.csv")
    assert curves.groupby("dataset")["step"].max().to_dict() == {"a": 24, "b": 16}
    assert set(zip(curves["dataset"], curves["variant"])) == {("a", "adamw"), ("a", "adam_l2"), ("a", "langevin"),
                                                              ("b", "adamw"), ("b", "langevin")}
    pac = pd.read_csv(root / "figures/paper/a+b/fig6_pac_bayes.csv")
    assert set(pac["dataset"]) == {"a", "b"} and (pac["lam"] > 0).all()
    assert {"variant", "pac_bayes_status", "hyp_kl_nonneg", "hyp_loss_le_1"} <= set(pac.columns)
