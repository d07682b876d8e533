"""The measurement budget (villani.plan.budget): one formula for the most products of a
measure job, read by its cluster request, the cost model and the job itself; importable
without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from villani.dag import resources as R
from villani.measure import cost_model as cm
from villani.plan import budget as B
from villani.plan.config import load_params, resolve
from villani.plan.schedule import checkpoint_steps, spectrum_at

SETTINGS = {"lanczos_steps": 60, "slq_steps": 80, "slq_probes": 5, "num_probes": 64}


def _measure(**kw):
    """The typed ``measure`` section of these settings (the budget reads a resolved section)."""
    return resolve({"measure": {**SETTINGS, **kw}}).measure


ME = _measure()


def test_the_formula_by_phase():
    b = B.budget(ME, spectrum=True, slq_starts=3)
    assert (b.lanczos, b.slq, b.trace, b.slq_starts) == (60, 2 * 80, 64, 3)
    assert b.spectrum == 60 + 160 and b.total == 60 + 160 + 64
    none = B.budget(ME, spectrum=False, slq_starts=3)
    assert (none.spectrum, none.total) == (0, 64)


def test_slq_starts_follow_the_tolerance_except_where_the_density_is_kept_whole():
    steps = [0, 10, 20]
    me = _measure(slq_cdf_tol=0.01, full_density="ends")
    assert B.slq_starts(me, 1000, 10, steps) == (5, False)  # 20 starts asked at d = 1000, at most slq_probes
    assert B.slq_starts(me, 10**8, 10, steps) == (1, False)
    assert B.slq_starts(me, 10**8, 0, steps) == B.slq_starts(me, 10**8, 20, steps) == (5, True)
    assert B.slq_starts(_measure(slq_cdf_tol=0.01, full_density="never"), 10**8, 0, steps) == (1, False)
    assert B.slq_starts(ME, 10**8, 10, steps) == (5, True)  # no tolerance: every start


def test_the_doubly_stochastic_groups_spend_the_tokens_of_num_probes():
    assert B.ds_group_cap(64, 64, 1, 1) == 64 * 64
    assert B.ds_group_cap(64, 64, 8, 4) == 128 and B.ds_group_cap(1, 64, 64, 8) == 2
    assert B.ds_groups(229, 1) == 229 and B.ds_groups(1, 8) == 2


@pytest.mark.parametrize("preset", ["params.yaml", "configs/ptb.yaml", "configs/paper.yaml"])
def test_the_cluster_request_and_the_cost_model_read_the_budget(preset):
    p = load_params([preset])
    me, steps = p["measure"], checkpoint_steps(p["train"])
    for step in steps:
        most = B.checkpoint_budget(me, R.D_125M, step, steps)
        assert R.max_hvps(me, step, steps) == most.total
        spectrum = spectrum_at(me.spectrum_every, step, steps)
        assert most.total == (most.spectrum if spectrum else 0) + me.num_probes
        parts = cm.planned_parts(me, tokens=511, block_tokens=511, probes=me.num_probes,
                                 slq_starts=most.slq_starts, keeps_graph=True, spectrum=spectrum)
        assert sum(parts.values(), cm.Counts(0, 0, 0, 0)).products == most.total


def test_the_budget_imports_no_torch():
    code = "import sys, villani.plan.budget; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
