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
from pathlib import Path

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
    from villani.dag.plan_stage import write_plan
    from villani.measure import measure_checkpoint
    from villani.measure.landscape import run_landscape
    from villani.measure.rays import run_rays
    from villani.model.causal_lm import write_pretrained

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


@pytest.mark.slow  # 16 s of `make test-fast` on 2 cores: past its 3-minute budget
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
    with pytest.raises(ValueError, match=r"c.json: step: missing"):  # a segment manifest has no step
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
    from villani.model.causal_lm import read_pretrained

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


# --------------------------------------------------------------------------- required = what readers read
def test_a_record_missing_any_required_key_is_refused_naming_file_and_key(written, tmp_path):
    """Every key a schema requires, taken out of a real record of its kind: one line naming the
    file and the key, from the check every reader makes (villani.io.records.check)."""
    for kind, paths in written.items():
        doc = atomic.read_json(paths[0])
        for key in records.schema(kind)["required"]:
            with pytest.raises(ValueError) as e:
                records.check(kind, {k: v for k, v in doc.items() if k != key}, paths[0])
            assert str(e.value).startswith(f"{paths[0]}: {key}: missing (expected ") and "\n" not in str(e.value), (
                kind, str(e.value))


@pytest.mark.parametrize("key", ["lanczos", "precision_audit", "cost", "train_digest", "record_sha256"])
def test_the_measure_reader_refuses_a_record_of_an_older_villani(written, tmp_path, key):
    """A measure JSON without a key an older villani did not write (the spectrum run, the
    precision audit, the cost, the provenance, the hash) is refused by the reader in one line:
    no reader fills in what a record lacks."""
    from villani.io.results import read_measure

    path = tmp_path / "step0000024.json"
    path.write_text(json.dumps({k: v for k, v in atomic.read_json(written["measure"][0]).items() if k != key}))
    with pytest.raises(ValueError, match=rf"^{path}: {key}: missing \(expected [^\n]+\)$"):
        read_measure(path)


def test_a_manifest_without_a_checkpoints_sha256_is_refused_by_the_checkpoint_and_segment_readers(copy):
    """A segment manifest whose checkpoint entry lacks ``meta_sha256`` (as an older villani
    wrote them): the checkpoint reader and the segment check both refuse it through its schema,
    one line naming the manifest and the key — no branch reads past it."""
    from villani.training.checkpoint import read_meta
    from villani.training.segments import segment_status

    p, _, root = copy
    manifest = RUN.path(layout.SEGMENT, root, step=12)
    doc = atomic.read_json(manifest)
    i = [c["step"] for c in doc["checkpoints"]].index(6)
    doc["checkpoints"][i].pop("meta_sha256")
    manifest.write_text(json.dumps(doc))
    why = f"{manifest}: checkpoints[{i}].meta_sha256: missing (expected "
    with pytest.raises(ValueError) as e:
        read_meta(root, step=6, **RUN.wildcards)
    assert "its segment manifest cannot be read (" + why in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert segment_status(p, root, RUN.wildcards, 12).startswith(why)


# --------------------------------------------------------------------------- the generated lists
def _raw(name: str) -> dict:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load((REPO / "src" / "villani" / "schemas" / name).read_text())


def test_the_lists_readers_and_writers_use_are_the_schemas(written, trained, pristine):
    """The ledger's CSV columns, the step log's fields and the measurement row's columns are
    those the shipped schemas list (read here from the YAML), and the files written have them."""
    from villani.claims.reporting.ledger import COLUMNS
    from villani.io import measure_record
    from villani.io.results import measurement_row
    from villani.training.step_log import LOG_FIELDS

    claim = _raw("claims.schema.yaml")["$defs"]["claim"]
    leave_out = _raw("claims.table.yaml")["rows_of"]["leave_out"]
    assert list(COLUMNS) == [k for k in claim["properties"] if k not in leave_out]
    assert set(claim["properties"]) == set(claim["required"]) | {"power_note"}  # every column typed and read
    p, _, synthetic = pristine
    for f in (layout.CLAIMS_CSV, layout.CLAIMS_FINDINGS_CSV):
        assert (layout.fmt(f, synthetic, dataset=p["data"]["name"]).read_text().splitlines()[0]
                == ",".join(COLUMNS))
    assert list(LOG_FIELDS) == list(_raw("step_log.table.yaml")["properties"])
    for log in trained[2].glob("runs/*/*/*/*/logs/*.csv"):
        assert log.read_text().splitlines()[0] == ",".join(LOG_FIELDS)
    measure = _raw("measure.schema.yaml")
    row = measurement_row(atomic.read_json(written["measure"][0]), "m.json")
    for key in measure["required"]:  # each key the readers need is in the row, flattened one level
        assert key in row or any(c.startswith((f"{key}_", "psi_s=", "block:")) for c in row), key
    for key in set(measure["properties"]) - set(measure["required"]):  # and no key they do not read
        assert key not in row, key
    assert set(measure_record.TRACE_FIELDS) | {"estimator", "ci95"} == set(measure["$defs"]["trace_L"]["required"])
    assert set(measure_record.ROW_COLUMNS) <= set(row)


# --------------------------------------------------------------------------- tables
#: each table pattern a stage row writes → its schema; what has none, and why
TABLE_OF = {layout.SEGMENT_LOG: "step_log", layout.MEASURE_PARQUET: "measure_samples", layout.RAYS_CSV: "rays",
            layout.SURFACE_CSV: "surface", layout.COST_CSV: "hvp_cost", layout.BOUNDS_CSV: "bounds",
            layout.CLAIMS_CSV: "claims", layout.CLAIMS_FINDINGS_CSV: "claims"}
NO_SCHEMA = {layout.TRAIN_BLOCKS: "token blocks: one list column, checked by villani.data.blocks",
             layout.VALIDATION_BLOCKS: "token blocks", layout.TEST_BLOCKS: "token blocks",
             layout.TABLE: "figure data: never read back", layout.FIGURE: "figures and their data: never read back",
             layout.PLOT: "DVC's plot data: read by DVC alone",
             layout.METRICS_TABLE: "every number per variant and λ for people: columns follow the design, never read back"}


def test_every_table_a_stage_writes_has_a_schema():
    from villani.io import tables
    from villani.plan.stages import TABLE

    written = {f for s in TABLE for f in s.outputs if f.endswith((".csv", ".parquet", "{figure}", "{plot}.csv"))}
    assert written == set(TABLE_OF) | set(NO_SCHEMA), written ^ (set(TABLE_OF) | set(NO_SCHEMA))
    assert set(TABLE_OF.values()) == set(tables.TABLES)


@pytest.fixture(scope="module")
def tables_written(written, trained, pristine) -> dict[str, list]:
    """{table: [paths]}: the tables the real stages wrote — the tiny run's step logs and measure
    Parquet, its rays and landscape; the bounds and claims CSVs of the synthetic tree."""
    root, synthetic = trained[2], pristine[2]
    found = {"step_log": root.glob("runs/*/*/*/*/logs/*.csv"), "measure_samples": root.glob("runs/*/*/*/*/measure/*.parquet"),
             "rays": root.glob("rays/*/rays.csv"), "surface": root.glob("landscape/*/*/surface.csv"),
             "bounds": synthetic.glob("bounds/*/bounds.csv"), "claims": synthetic.glob("claims/*.csv")}
    return {name: sorted(paths) for name, paths in found.items()}


def test_every_table_the_stages_wrote_is_valid(tables_written):
    """Each table a real writer wrote reads back through its schema: the writers check it first."""
    from villani.io import tables

    assert set(tables_written) == set(tables.TABLES) - {"hvp_cost"}  # the cost sweep: tests/figures/test_cost.py
    for name, paths in tables_written.items():
        assert paths, name
        for path in paths:
            df = tables.read(name, path)
            assert set(tables.schema(name)["required"]) <= set(df.columns), (name, path)


def _damaged(tmp_path, name, path, change):
    import pandas as pd

    df = pd.read_parquet(path) if str(path).endswith(".parquet") else pd.read_csv(path, keep_default_na=False,
                                                                                   dtype=str)
    out = tmp_path / Path(path).name
    df = change(df)
    df.to_parquet(out, index=False) if out.suffix == ".parquet" else df.to_csv(out, index=False)
    return out


def test_a_table_missing_any_required_column_is_refused_naming_file_and_column(tables_written, tmp_path):
    from villani.io import tables

    for name, paths in tables_written.items():
        for col in tables.schema(name)["required"]:
            out = _damaged(tmp_path, name, paths[0], lambda df: df.drop(columns=[col]))
            with pytest.raises(ValueError) as e:
                tables.read(name, out)
            assert str(e.value).startswith(f"{out}: column {col!r} missing (expected the columns of villani/schemas/"
                                           f"{name}.table.yaml") and "\n" not in str(e.value), str(e.value)


TABLE_DAMAGE = [
    ("step_log", "skipped", "2", 'column skipped, row 1: 2 is invalid (expected 0 or 1)'),
    ("measure_samples", "kind", "trace", 'column kind, row 1: "trace" is invalid (expected a sample kind'),
    ("rays", "kind", "diagonal", 'column kind, row 1: "diagonal" is invalid (expected one of random, checkpoint)'),
    ("surface", "theta_sq", "-1.0", "column theta_sq, row 1: -1.0 is invalid (expected a number ≥ 0)"),
    ("bounds", "seed", "0.5", "column seed, row 1: 0.5 is invalid (expected an integer ≥ 0)"),
    ("claims", "verdict", "true", 'column verdict, row 1: "true" is invalid (expected one of supported, refuted'),
]


def _parsed(text: str):
    """A cell's text as the value a writer holds: an integer, a number, or the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


@pytest.mark.parametrize("name, column, value, line", TABLE_DAMAGE)
def test_a_bad_value_in_a_table_is_one_line_naming_file_column_and_row(tables_written, tmp_path, name, column,
                                                                         value, line):
    from villani.io import tables

    path = tables_written[name][0]
    out = _damaged(tmp_path, name, path, lambda df: df.assign(**{column: [value] + list(df[column][1:])}))
    with pytest.raises(ValueError) as e:
        tables.read(name, out)
    assert str(e.value).startswith(f"{out}: {line}") and "\n" not in str(e.value), str(e.value)
    df = tables.read(name, path)
    df[column] = df[column].astype(object)
    df.loc[0, column] = _parsed(value)
    target = tmp_path / ("written" + Path(path).suffix)
    with pytest.raises(ValueError, match=rf"^{target}: column {column}, row 1: "):
        tables.write(name, target, df)
    assert not target.exists(), "an invalid table was written"


def test_an_unknown_column_is_refused(tables_written, tmp_path):
    from villani.io import tables

    out = _damaged(tmp_path, "rays", tables_written["rays"][0], lambda df: df.assign(psi=1.0))
    with pytest.raises(ValueError, match=rf"^{out}: column 'psi': unknown column \(expected the columns of "
                                         r"villani/schemas/rays.table.yaml\)$"):
        tables.read("rays", out)
