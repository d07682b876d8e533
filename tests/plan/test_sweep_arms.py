"""measure.sweep_arms: the lr / warm-up sweep arms measured at every checkpoint or at their
first and last only — one function (villani.plan.schedule.measured_steps) for the DAG's
targets, `villani measure --all`, the readers, pruning and the cost model."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from villani.dag import targets
from villani.plan.config import ParamsError, deep_merge, load_params, resolve
from villani.plan.runs import is_sweep_arm, runs, sweep_variants
from villani.plan.schedule import checkpoint_steps, measured_steps


def _ptb(**measure):
    doc = deep_merge(load_params([REPO / "params.yaml", REPO / "configs/ptb.yaml"]), {"measure": measure})
    return resolve(doc)


def test_sweep_arms_at_their_ends_only():
    p = _ptb(sweep_arms="ends")
    steps = checkpoint_steps(p["train"])
    arms = sweep_variants(p)
    assert arms and all(is_sweep_arm(v) for v in arms) and not is_sweep_arm("adamw") and not is_sweep_arm("adam_l2")
    assert measured_steps(p, arms[0]) == [steps[0], steps[-1]]
    assert measured_steps(p, "adamw") == steps and measured_steps(p, "adamw_noise") == steps
    assert measured_steps(_ptb(sweep_arms="every"), arms[0]) == steps


def test_the_dag_asks_for_the_measured_checkpoints_only():
    every, ends = _ptb(sweep_arms="every"), _ptb(sweep_arms="ends")
    n_steps = len(checkpoint_steps(every["train"]))
    n_arm_runs = sum(is_sweep_arm(r.variant) for r in runs(every))
    assert len(targets.measurements(every)) - len(targets.measurements(ends)) == n_arm_runs * (n_steps - 2)
    inner = [t for t in targets.measurements(ends) if "adamw_lr" in t]
    assert len(inner) == 2 * n_arm_runs


def test_a_job_per_run_with_sweep_arms_at_their_ends_is_refused_in_one_line():
    doc = deep_merge(load_params([REPO / "params.yaml", REPO / "configs/ptb.yaml"]),
                     {"jobs": {"measure": "run", "train": "run"}, "measure": {"sweep_arms": "ends"}})
    with pytest.raises(ParamsError, match=r'^x: jobs.measure: "run" is invalid with measure.sweep_arms: ends') as e:
        targets.check_job_split(resolve(doc), "x")
    assert "\n" not in str(e.value)
    targets.check_job_split(resolve(deep_merge(doc, {"measure": {"sweep_arms": "every"}})), "x")


def test_the_cost_model_follows_the_preset():
    from villani.measure import cost_model as cm

    plans = {k: cm.preset_plan(_ptb(sweep_arms=k), probes=16, memory_bytes=80e9) for k in ("every", "ends")}
    inner = lambda plan: [n for n, _ in plan["jobs"]][1:-1]  # noqa: E731
    assert set(inner(plans["every"])) == {plans["every"]["runs"]}
    assert set(inner(plans["ends"])) == {plans["ends"]["runs"] - 2 * 12}  # 2 lr × 4 λ × 3 seeds


def test_measure_paths_and_pruning_skip_what_is_not_measured(tmp_path):
    from villani.dag.prune import prunable
    from villani.io.results import measure_paths
    from villani.plan import layout

    p = _ptb(sweep_arms="ends")
    arm = next(r for r in runs(p) if is_sweep_arm(r.variant))
    steps = checkpoint_steps(p["train"])
    got = [s for r, s, _ in measure_paths(p, tmp_path, variants=None) if r == arm]
    assert got == [steps[0], steps[-1]]
    # an inner checkpoint of a sweep arm has no measure JSON by design: its weights may go at once
    weights = arm.path(layout.CKPT_WEIGHTS, tmp_path, step=steps[1])
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"w")
    main = next(r for r in runs(p) if r.variant == "adamw")
    kept = main.path(layout.CKPT_WEIGHTS, tmp_path, step=steps[1])  # not measured yet: kept
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"w")
    assert prunable(p, tmp_path) == [weights]
