"""Checkpoint schedule and segments are a static function of params."""

from villani.plan.schedule import (
    checkpoint_steps,
    checkpoints_in_segment,
    segment_ends,
    segment_for,
    segment_start,
)


def _t(**kw):
    t = {"steps": 240, "checkpoints": {"count": 4, "spacing": "linear", "steps": None}, "segments": 2}
    t.update(kw)
    return t


def test_linear_checkpoints_include_zero_and_end():
    assert checkpoint_steps(_t()) == [0, 60, 120, 180, 240]


def test_log_and_explicit_checkpoints():
    log = checkpoint_steps(_t(checkpoints={"count": 4, "spacing": "log", "steps": None}))
    assert log[0] == 0 and log[-1] == 240 and log == sorted(set(log))
    assert checkpoint_steps(_t(checkpoints={"count": 1, "spacing": "linear", "steps": [10, 240]})) == [0, 10, 240]


def test_segments_partition_the_checkpoints():
    t = _t(segments=3)
    ends = segment_ends(t)
    assert ends == [120, 180, 240]
    written = [s for e in ends for s in checkpoints_in_segment(t, e)]
    assert written == checkpoint_steps(t)
    assert [segment_start(t, e) for e in ends] == [0, 120, 180]
    assert segment_for(t, 0) == 120 and segment_for(t, 60) == 120 and segment_for(t, 240) == 240


def test_a_job_per_run_covers_the_segment_ends_or_the_checkpoints():
    from villani.plan.schedule import job_steps

    t = _t(segments=2)
    assert job_steps("train", t) == segment_ends(t) == [120, 240]
    assert job_steps("measure", t) == checkpoint_steps(t) == [0, 60, 120, 180, 240]
