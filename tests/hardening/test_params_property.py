"""Property test: random parameter documents never crash the validator.

Valid documents build a complete static DAG (every target list, and for a sample a real
`snakemake -n`); invalid ones raise ParamsError with one line that names a key.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, TINY
from villani.dag import targets
from villani.figures import figure_outputs
from villani.plan.config import ParamsError, deep_merge, dump_yaml, load_params, read_yaml, resolve
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

def _alias_bomb(width=10, depth=6):
    """What YAML aliases build (`b: &b [*a, *a, …]`): shared lists that expand to width**depth values."""
    node = [1] * width
    for _ in range(depth):
        node = [node] * width
    return node


values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 500), st.floats(-1.0, 1e4), st.sampled_from([float("nan"), float("inf")]),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(10**8, 10**18), st.just(_alias_bomb()),
    st.text(max_size=8), st.text(max_size=8).map(lambda t: t + "\n"), st.text(min_size=65, max_size=400), st.lists(st.floats(-0.1, 0.1, allow_nan=False), max_size=4),
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
    if draw(st.integers(0, 9)) == 0 and isinstance(doc.get("model"), dict) and isinstance(
            doc["model"].get("config"), dict):  # free-form keys
        doc["model"]["config"][draw(st.text(min_size=1, max_size=6))] = draw(values)
    return doc


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, path + (i,))
    else:
        yield path, node


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
@pytest.mark.slow  # 28 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_random_documents_validate_cleanly(doc):
    try:
        p = resolve(doc, source="p.yaml")
    except ParamsError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith("p.yaml: ") and len(msg) < 400
        return
    for path, v in _leaves(p):  # nothing a job could trip on later
        assert not (isinstance(v, float) and not math.isfinite(v)), path
        assert not (isinstance(v, str) and any(c in v for c in "\n\r\x00")), path
    assert len(p["data"]["name"]) <= 64 and p["measure"]["num_probes"] <= 100_000 and p["train"]["steps"] <= 10**8
    _check_dag(p)


@st.composite
def yaml_texts(draw):
    """A parameter file as text with one fault: a duplicate key, an alias bomb, NaN or an empty document."""
    fault = draw(st.sampled_from(["duplicate", "bomb", "nan", "empty", "newline"]))
    key = draw(st.sampled_from(["steps", "lr", "batch_size"]))
    pad = draw(st.integers(0, 5))
    head = "# comment\n" * pad
    if fault == "duplicate":
        return fault, pad + 3, head + f"train:\n  {key}: 3\n  {key}: 4\n"
    if fault == "bomb":
        lines = ["model:", "  config:", "    l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
        for i in range(1, draw(st.integers(6, 12))):
            lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
        return fault, None, head + "\n".join(lines) + "\n"
    if fault == "nan":
        return fault, None, head + f"train:\n  {key}: {draw(st.sampled_from(['.nan', '.NaN', '.inf', '-.inf']))}\n"
    if fault == "newline":
        return fault, None, head + 'data:\n  name: "pydoc\\n"\n'
    return fault, None, head + draw(st.sampled_from(["", "---\n", "# nothing\n", "~\n"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(yaml_texts())
def test_faulty_yaml_files_are_one_line_errors(tmp_path, case):
    fault, line, text = case
    path = tmp_path / "p.yaml"
    path.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(ParamsError) as e:
        load_params([path])
    msg = str(e.value)
    assert time.perf_counter() - t0 < 5  # an alias bomb is refused, not expanded
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    expect = {"duplicate": f"line {line}: duplicate key", "bomb": "alias", "nan": "finite", "empty": "empty",
              "newline": "data.name"}[fault]
    assert expect in msg, msg


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
@pytest.mark.slow  # 34 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_valid_random_documents_give_a_snakemake_dry_run(tmp_path_factory, doc):
    p = resolve(doc, source="p.yaml")
    _check_dag(p)
    cfg = tmp_path_factory.mktemp("dry") / "p.yaml"
    dump_yaml(p, cfg)
    out = subprocess.run([Path(sys.executable).parent / "snakemake", "-n", "--quiet", "--configfile", str(cfg)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
