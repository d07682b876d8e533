"""Every record a stage writes for another has a shipped JSON Schema, checked on write and
on read (villani.io.records), and the docs' record reference is rendered from the schemas.

The records checked are real ones: a tiny run trained and one of its checkpoints measured
(checkpoint.json, segment manifests, stats.json, a measure JSON), its rays, landscape, fetch,
pretrained and plan stages run (slopes.json, surface.json, the fetch record, pretrained.json
with and without a model.name, the plan), and the bounds.json and claims ledger the real
writers make of the synthetic results tree. A bad value in each kind
is one line naming the file and the key, from the writer (nothing written) and from the
reader."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, tiny_params
from villani.io import atomic, records
from villani.io.record_docs import END, START, reference_markdown
from villani.plan import layout
from villani.plan.params_file import load_schema
from villani.plan.runs import Run

RUN = Run("tiny", "adamw", 0.01, 0)


@pytest.fixture(scope="module")
def written(trained, pristine, tmp_path_factory):
    """{kind: [paths]} of real records of every kind (the measure JSON, rays, landscape,
    fetch, pretrained and plan records written here)."""
    from villani.data.fetch import fetch, write_record
    from villani.dag.run_set import write_plan
    from villani.measure import measure_checkpoint
    from villani.measure.landscape import run_landscape
    from villani.measure.rays import run_rays
    from villani.model import write_pretrained

    p, _, root = trained
    measured = measure_checkpoint(p, variant="adamw", lam=RUN.lam, seed=RUN.seed, step=p["train"]["steps"],
                                  root=root, device="cpu")
    _, _, synthetic = pristine
    ds = p["data"]["name"]
    run_rays(tiny_params(train={"lambdas": [RUN.lam]}), root, "cpu")  # the checkpoint ray through the trained run
    run_landscape(p, RUN.lam, root, "cpu")
    write_record(fetch(p), layout.fmt(layout.FETCH_RECORD, root, dataset=ds))
    write_pretrained(p, root)  # no model.name: the record of nulls
    named = tmp_path_factory.mktemp("named")
    _save_gpt_neo_config(named / "neo")
    write_pretrained(tiny_params(model={"init": "scratch", "name": str(named / "neo")}), named)
    plan, _, _ = write_plan(p, tmp_path_factory.mktemp("plan"))
    return {"measure": [measured],
            "checkpoint": sorted(root.glob("runs/*/*/*/*/ckpt/*/checkpoint.json")),
            "segment": sorted(root.glob("runs/*/*/*/*/segments/*.json")),
            "data_stats": [layout.fmt(layout.DATA_STATS, root, dataset=ds)],
            "bounds": [layout.fmt(layout.BOUNDS_JSON, synthetic, dataset=ds)],
            "claims": [layout.fmt(layout.CLAIMS_JSON, synthetic, dataset=ds)],
            "ray_slopes": [layout.fmt(layout.RAYS_SLOPES, root, dataset=ds)],
            "surface": [layout.fmt(layout.SURFACE_JSON, root, dataset=ds, lam=RUN.lam)],
            "pretrained": [layout.fmt(layout.PRETRAINED_META, named, dataset=ds),
                           layout.fmt(layout.PRETRAINED_META, root, dataset=ds)],
            "fetch": [layout.fmt(layout.FETCH_RECORD, root, dataset=ds)],
            "plan": [plan]}


def _save_gpt_neo_config(folder) -> None:
    """A local model.name: the config of a small GPT-Neo, saved as the hub would hold it."""
    from transformers import GPTNeoConfig

    GPTNeoConfig(vocab_size=320, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32, window_size=16,
                 attention_types=[[["global", "local"], 1]], max_position_embeddings=32).save_pretrained(folder)


def test_every_record_kind_written_is_valid_and_every_key_it_holds_is_documented(written):
    assert set(written) == set(records.KINDS)
    for kind, paths in written.items():
        assert paths, kind
        documented = set(records.schema(kind)["properties"])
        for path in paths:
            doc = atomic.read_json(path)
            assert records.check(kind, doc, path) is doc
            assert set(doc) <= documented, (kind, path, sorted(set(doc) - documented))


# one damage per kind: (kind, change of the parsed record, key the line must name)
DAMAGE = [
    ("measure", lambda d: d.update(val_ppl="abc"), 'val_ppl: "abc" is invalid (expected a number)'),
    ("measure", lambda d: d["trace_L"].pop("mean"), "trace_L.mean: missing (expected a number)"),
    ("checkpoint", lambda d: d.update(weights_sha256="x" * 64), "weights_sha256: " + json.dumps("x" * 64)[:20]),
    ("checkpoint", lambda d: d.update(step=-1), "step: -1 is invalid (expected an integer ≥ 0)"),
    ("segment", lambda d: d["checkpoints"][0].update(meta_sha256=None), "checkpoints[0].meta_sha256: null is invalid"),
    ("data_stats", lambda d: d["splits"]["train"].update(blocks=0), "splits.train.blocks: 0 is invalid"),
    ("bounds", lambda d: d["rows"][0].update(lam=-1.0), "rows[0].lam: -1.0 is invalid (expected a number ≥ 0)"),
    ("claims", lambda d: d["claims"][0].update(verdict="true"), 'claims[0].verdict: "true" is invalid (expected one of'),
    ("ray_slopes", lambda d: d["fits"][0].update(kind="diagonal"),
     'fits[0].kind: "diagonal" is invalid (expected one of random, checkpoint)'),
    ("surface", lambda d: d["centres"][0]["per_slice"][1].update(F_min="low"),
         'centres[0].per_slice[1].F_min: "low" is invalid (expected a number)'),
    ("pretrained", lambda d: d.update(init="finetuned"), 'init: "finetuned" is invalid (expected one of scratch, pretrained)'),
    ("fetch", lambda d: d["corpus"].update(where="cloud"), 'corpus.where: "cloud" is invalid (expected one of hub, local)'),
    ("plan", lambda d: d["runs"][0].update(seed=-1), "runs[0].seed: -1 is invalid (expected an integer ≥ 0)"),
]


@pytest.mark.parametrize("kind, change, line", DAMAGE)
def test_a_bad_value_is_one_line_naming_file_and_key_on_write_and_on_read(written, tmp_path, kind, change, line):
    doc = atomic.read_json(written[kind][0])
    change(doc)
    out = tmp_path / "record.json"
    with pytest.raises(ValueError) as e:
        records.write_record(out, doc, kind)
    assert str(e.value).startswith(f"{out}: {line}") and "\n" not in str(e.value), str(e.value)
    assert not out.exists(), "an invalid record was written"
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as e:
        records.check(kind, atomic.read_json(out), out)
    assert str(e.value).startswith(f"{out}: {line}"), str(e.value)


def test_an_unknown_key_and_a_record_of_another_kind_are_refused(written, tmp_path):
    doc = atomic.read_json(written["measure"][0])
    with pytest.raises(ValueError, match=r"m.json: val_pp: unknown key \(expected the keys of "
                                         r"villani/schemas/measure.schema.yaml\)"):
        records.check("measure", dict(doc, val_pp=1.0), "m.json")
    with pytest.raises(ValueError, match=r"c.json: weights_sha256: missing"):
        records.check("checkpoint", atomic.read_json(written["segment"][0]), "c.json")


def test_the_readers_refuse_a_damaged_checkpoint_json_naming_it(written, tmp_path):
    from villani.io.results import read_checkpoint_meta

    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps(dict(atomic.read_json(written["checkpoint"][0]), tokens_seen="many")))
    with pytest.raises(ValueError, match=rf'^{path}: tokens_seen: "many" is invalid \(expected an integer ≥ 0\)$'):
        read_checkpoint_meta(path)


def test_the_readers_refuse_damaged_slopes_surface_and_pretrained_records_naming_them(written, trained, tmp_path):
    """The rays figure's, the landscape figure's and the train stage's readers check the
    record before using it: one line naming the file and the key."""
    from villani.io.results import landscape_surface, rays_table
    from villani.model import read_pretrained

    p, _, root = trained
    ds = p["data"]["name"]
    damaged = [(layout.RAYS_SLOPES, layout.RAYS_CSV, {}, lambda d: d["summary"][0].update(n_random_rays=1.5),
                r"summary\[0\]\.n_random_rays: 1\.5 is invalid \(expected an integer ≥ 0\)",
                lambda: rays_table(p, tmp_path)),
               (layout.SURFACE_JSON, layout.SURFACE_CSV, {"lam": RUN.lam}, lambda d: d["centres"][0].pop("weights_sha256"),
                r"centres\[0\]\.weights_sha256: missing \(expected a sha256: 64 hex digits\)",
                lambda: landscape_surface(p, RUN.lam, tmp_path)),
               (layout.PRETRAINED_META, None, {}, lambda d: d.update(config_sha256="abc"),
                r'config_sha256: "abc" is invalid \(expected a sha256: 64 hex digits, or null\)',
                lambda: read_pretrained(tmp_path, ds))]
    for record, beside, wildcards, change, line, read in damaged:
        path = layout.fmt(record, tmp_path, dataset=ds, **wildcards)
        path.parent.mkdir(parents=True, exist_ok=True)
        if beside:
            shutil.copy(layout.fmt(beside, root, dataset=ds, **wildcards), layout.fmt(beside, tmp_path, dataset=ds,
                                                                                       **wildcards))
        doc = atomic.read_json(layout.fmt(record, root, dataset=ds, **wildcards))
        change(doc)
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match=rf"^{path}: {line}$"):
            read()


def test_the_audit_precisions_are_those_the_parameters_allow():
    assert (records.schema("measure")["$defs"]["precision"]["enum"]
            == load_schema()["properties"]["measure"]["properties"]["precision"]["enum"])


def test_docs_record_reference_is_generated_from_the_schemas():
    text = (REPO / "docs" / "records.md").read_text()
    listed = text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert listed == reference_markdown().strip("\n") + "\n", (
        "docs/records.md is out of date: python -c \"from villani.io.record_docs import write_reference; "
        "write_reference('docs/records.md')\"")
    for kind in records.KINDS:
        for key in records.schema(kind)["properties"]:
            assert f"| `{key}` |" in listed, (kind, key)
