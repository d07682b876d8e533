"""Every record proves what it was computed from (issue 40, item 5): a measure JSON carries
its own hash and names its checkpoint and parameters, bounds.json and the claims ledger
name the measure JSONs (and bounds.json) they were computed from; metrics, bounds, figures,
claims and the claims report refuse, in one line naming the file, a record that was edited,
names other weights, predates its hash, or was computed from inputs that changed since.

The record hash is over a canonical form, tested directly: the file's indentation and key
order do not matter, every value does."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import write_record
from villani.cli import main
from villani.io import atomic
from villani.io.records import RECORD_HASH, check_sealed, record_hash, sealed
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.runs import runs

pytestmark = pytest.mark.slow  # a trained and measured tiny tree (fixture 13–16 s on 2 idle cores): past test-fast's 3-minute budget

READERS = ("metrics", "bounds", "figures", "claims")


def test_the_record_hash_is_the_hash_of_what_a_reader_parses(tmp_path):
    rec = {"b": [1, 2.5, -0.0, 1e-320, 1e300, float("inf"), float("-inf"), float("nan"), None, True],
           "a": {"λ": 0.1 + 0.2, "nested": {"z": "text with \u00e9", "y": (1, 2)}}, "n": 10**30, "f": 3.0}
    path = tmp_path / "r.json"
    written = sealed(rec)
    atomic.write_json(path, written)
    doc = atomic.read_json(path, "record")
    assert check_sealed(doc, path, "record", "") == written[RECORD_HASH] == record_hash(rec)
    # another indentation, another key order: the same record
    path.write_text(json.dumps(dict(reversed(list(doc.items()))), separators=(",", ":"), ensure_ascii=True))
    assert record_hash(atomic.read_json(path, "record")) == written[RECORD_HASH]
    # every value counts: a float's last bit, an int for a float, a key
    for change in ({"f": 3}, {"a": {**doc["a"], "λ": 0.3}}, {"n": 10**30 + 1}, {"c": None}):
        changed = {**doc, **change}
        with pytest.raises(ValueError, match="was changed after it was written"):
            check_sealed(changed, path, "record", "")
    with pytest.raises(ValueError, match=r"r.json: record_sha256: missing \(expected a sha256"):
        check_sealed({k: v for k, v in doc.items() if k != RECORD_HASH}, path, "record", "")
    assert sealed(doc) == doc


def _run(p):
    return next(r for r in runs(p) if r.variant == "adamw" and r.lam == p["train"]["lambdas"][-1])


def _cli(capsys, stage, params, root) -> tuple[int, str]:
    rc = main([stage, "--params", str(params), "--results", str(root)])
    return rc, capsys.readouterr().err.strip()


def _snapshot(root):
    return {f: f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file() and f.parts[-3:-1] != ("runs",)}


@pytest.mark.slow  # 18 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_val_ppl_is_refused_by_every_reader(tree, capsys):
    p, params, root = tree
    path = _run(p).path(layout.MEASURE_JSON, root, step=p["train"]["steps"])
    rec = json.loads(path.read_text())
    path.write_text(json.dumps(dict(rec, val_ppl=rec["val_ppl"] * 0.5), indent=2))
    before = _snapshot(root)
    for stage in READERS:
        rc, err = _cli(capsys, stage, params, root)
        assert rc == 2 and "\n" not in err, (stage, err)
        assert f"{path}: measurement was changed after it was written (record_sha256 does not match" in err, (stage, err)
    assert _snapshot(root) == before  # nothing written from it


@pytest.mark.slow  # 3 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_foreign_weights_sha256_is_refused_even_when_resealed(tree, capsys):
    """The record's own hash made to match (as by a tool that rewrites records): the link to
    its checkpoint still fails."""
    p, params, root = tree
    run, step = _run(p), p["train"]["steps"]
    path = run.path(layout.MEASURE_JSON, root, step=step)
    path.write_text(json.dumps(sealed(dict(json.loads(path.read_text()), weights_sha256="ab" * 32))))
    for stage in READERS:
        rc, err = _cli(capsys, stage, params, root)
        assert rc == 2 and "\n" not in err, (stage, err)
        assert f"{path}: weights_sha256 abababababab… is not the checkpoint's" in err, (stage, err)
        assert str(run.path(layout.CKPT_META, root, step=step)) in err


def test_a_record_without_its_hash_is_refused(tree, capsys):
    p, params, root = tree
    path = _run(p).path(layout.MEASURE_JSON, root, step=0)
    path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != RECORD_HASH}))
    rc, err = _cli(capsys, "metrics", params, root)
    assert rc == 2 and f"{path}: record_sha256: missing (expected a sha256: 64 hex digits)" in err, err


def test_a_measurement_of_a_retrained_or_edited_run_is_refused(tree, tmp_path, capsys):
    """A parameter edited without retraining (metrics run by hand after editing train.lr),
    and a checkpoint.json edited after the measurement (its train_loss, which metrics reports)."""
    p, params, root = tree
    edited = tmp_path / "edited.yaml"
    dump_yaml(tiny_params(figures={"formats": ["png"], "dpi": 50}, train={"seeds": [0, 1], "lr": 0.004}), edited)
    rc, err = _cli(capsys, "metrics", edited, root)
    assert rc == 2 and "\n" not in err, err
    assert "measured on a checkpoint trained under other parameters (train.lr: 0.01 there, 0.004 here)" in err
    run = _run(p)
    meta = run.path(layout.CKPT_META, root, step=0)
    meta.write_text(json.dumps(dict(json.loads(meta.read_text()), train_loss=1.0)))
    rc, err = _cli(capsys, "bounds", params, root)
    assert rc == 2 and f"checkpoint_meta_sha256 is not the sha256 of {meta}" in err, err
    rc, err = _cli(capsys, "metrics", params, root)  # it reads the measurements first, then checkpoint.json
    assert rc == 2 and "\n" not in err and f"checkpoint_meta_sha256 is not the sha256 of {meta}" in err, err
    from villani.training.checkpoint import read_meta
    with pytest.raises(ValueError, match=f"^{re.escape(str(meta))}: sha256 does not match the one .* recorded when training wrote it"):
        read_meta(root, run.dataset, run.variant, run.lam, run.seed, 0)  # its training numbers' reader, on its own


@pytest.mark.slow  # 9 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_bounds_and_claims_computed_from_other_measurements_are_refused(tree, capsys):
    """A measurement made again (a new, valid record) after bounds.json and the ledger were
    written: readers of those refuse until `villani bounds` / `villani claims` run again."""
    p, params, root = tree
    run = _run(p)
    path = run.path(layout.MEASURE_JSON, root, step=0)
    write_record(root, p, run, 0, dict(json.loads(path.read_text()), val_ppl=123.0))
    bounds = layout.fmt(layout.BOUNDS_DIR, root, dataset="tiny") / "bounds.json"
    rel = path.relative_to(root).as_posix()
    for stage in ("metrics", "figures", "claims"):
        rc, err = _cli(capsys, stage, params, root)
        assert rc == 2 and "\n" not in err, (stage, err)
        assert f"{bounds}: computed from other measurements than those in {root} now ({rel} changed since); run " \
               f"`villani bounds --params {params} --results {root} --dataset tiny`" in err, (stage, err)
    assert _cli(capsys, "bounds", params, root)[0] == 0
    ledger = layout.fmt(layout.CLAIMS_JSON, root, dataset="tiny")
    rc, err = _cli(capsys, "metrics", params, root)
    assert rc == 2 and f"{ledger}: computed from other measurements" in err and "`villani claims --params " in err, err
    for stage in ("claims", "metrics"):
        rc, err = _cli(capsys, stage, params, root)
        assert rc == 0, (stage, err)


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_an_edited_bounds_json_or_ledger_is_refused(tree, capsys):
    p, params, root = tree
    bounds = layout.fmt(layout.BOUNDS_DIR, root, dataset="tiny") / "bounds.json"
    doc = json.loads(bounds.read_text())
    doc["rows"][0]["val_ppl"] = 1.0
    bounds.write_text(json.dumps(doc))
    rc, err = _cli(capsys, "figures", params, root)
    assert rc == 2 and f"{bounds}: bounds summary was changed after it was written" in err, err
    assert _cli(capsys, "bounds", params, root)[0] == 0
    ledger = layout.fmt(layout.CLAIMS_JSON, root, dataset="tiny")
    doc = json.loads(ledger.read_text())
    doc["counts"]["supported"] += 1
    ledger.write_text(json.dumps(doc))
    rc = main(["claims-report", "--params", str(params), "--results", str(root)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"{ledger}: claims ledger was changed after it was written" in err, err
