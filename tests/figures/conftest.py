"""A synthetic results tree (exact layout, realistic numbers), its bounds and every figure, once."""

from __future__ import annotations

import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import build_results


def figure_params():
    """The tiny parameter set with two seeds (so s.e.m. bands exist), PNG only, low dpi; the
    Langevin arm at β = 1/λ (eq. 41's temperature, so the envelope's hypotheses can hold)."""
    return tiny_params(train={"seeds": [0, 1], "langevin": {"beta": None}}, figures={"formats": ["png"], "dpi": 50})


@pytest.fixture(scope="session")
def rendered(tmp_path_factory):
    """(params, root, written paths): bounds table and every registered figure/table rendered."""
    from villani.bounds.table import write_bounds
    from villani.figures import render_all

    p = figure_params()
    root = build_results(tmp_path_factory.mktemp("figures-results"), p)
    write_bounds(p, root)
    return p, root, render_all(p, root)
