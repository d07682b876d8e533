"""Property test: random parameter documents never crash the validator.

Valid documents build a complete static DAG (every target list, and for a sample a real
`snakemake -n`); invalid ones raise ParamsError with one line that names a key.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, TINY
from villani.dag import targets
from villani.figures import figure_outputs
from villani.plan.config import ParamsError, deep_merge, dump_yaml, read_yaml, resolve
from villani.plan.runs import runs
from villani.plan.schedule import checkpoint_steps, segment_ends

BASE = deep_merge(read_yaml(REPO / "params.yaml"), read_yaml(TINY))

# every leaf path of the base document
PATHS = []


def _walk(d, prefix=()):
    for k, v in d.items():
        if isinstance(v, dict) and v and k != "config":
            _walk(v, prefix + (k,))
        else:
            PATHS.append(prefix + (k,))


_walk(BASE)

values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 500), st.floats(-1.0, 1e4), st.sampled_from([float("nan"), float("inf")]),
    st.text(max_size=8), st.lists(st.floats(-0.1, 0.1, allow_nan=False), max_size=4),
    st.lists(st.integers(-2, 50), max_size=4), st.sampled_from(["builtin:pydoc", "hf:x", "files", "bpe", "linear"]),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


@st.composite
def documents(draw):
    doc = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = doc
        for k in path[:-1]:
            node = node[k]
        if draw(st.integers(0, 9)) == 0:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = draw(values)
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.text(min_size=1, max_size=6))] = draw(values)
    return doc


def _check_dag(p):
    all_runs = list(runs(p))
    assert all_runs
    steps = checkpoint_steps(p["train"])
    assert steps[0] == 0 and steps[-1] == p["train"]["steps"] and steps == sorted(set(steps))
    assert segment_ends(p["train"])[-1] == p["train"]["steps"]
    assert len(targets.measurements(p)) == len(all_runs) * len(steps)  # every run of every variant
    targets.segments(p)
    targets.figure_inputs(p)
    figure_outputs(p)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_random_documents_validate_cleanly(doc):
    try:
        p = resolve(doc, source="p.yaml")
    except ParamsError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith("p.yaml: ")
        return
    _check_dag(p)


@st.composite
def valid_documents(draw):
    doc = copy.deepcopy(BASE)
    lams = draw(st.lists(st.sampled_from([0.0, 1e-5, 1e-4, 0.001, 0.003, 0.01, 0.1]), min_size=1, max_size=4,
                         unique=True))
    steps = draw(st.integers(4, 60))
    count = draw(st.integers(1, min(steps, 8)))
    doc["train"].update(lambdas=lams, seeds=draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True)),
                        steps=steps, warmup_steps=draw(st.integers(0, steps)),
                        checkpoints={"count": count, "spacing": draw(st.sampled_from(["linear", "log"]))},
                        segments=1,
                        **{arm: {"lambdas": draw(st.lists(st.sampled_from(lams), max_size=2, unique=True))}
                           for arm in ("adamw_noise", "adam_l2", "langevin")})
    n_ckpt = len(checkpoint_steps(resolve(doc)["train"])) - 1
    doc["train"]["segments"] = draw(st.integers(1, n_ckpt))
    return doc


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(valid_documents())
def test_valid_random_documents_give_a_snakemake_dry_run(tmp_path_factory, doc):
    p = resolve(doc, source="p.yaml")
    _check_dag(p)
    cfg = tmp_path_factory.mktemp("dry") / "p.yaml"
    dump_yaml(p, cfg)
    out = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--quiet", "--configfile", str(cfg)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
