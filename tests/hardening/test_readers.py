"""Every stage checks what it reads: a damaged or foreign file stops the stage with one line
naming the file and field, before any output is written — never a traceback, never a number
computed from a value that was dropped."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from tests.conftest import tiny_params
from villani.cli import main
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.runs import runs


def _last_measure(p, root, seed=1):
    run = next(r for r in runs(p) if r.variant == "adamw" and r.lam == p["train"]["lambdas"][-1] and r.seed == seed)
    return run.path(layout.MEASURE_JSON, root, step=p["train"]["steps"])


def _cli(capsys, *args) -> tuple[int, str]:
    rc = main(list(args))
    err = capsys.readouterr().err.strip()
    return rc, err


def _snapshot(folder):
    return {f: f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _set_raw(path, key, raw):
    """Replace the value of top-level ``key`` in a JSON file by the text ``raw`` (e.g. NaN)."""
    doc = json.loads(path.read_text())
    doc[key] = "@@"
    path.write_text(json.dumps(doc).replace('"@@"', raw))


@pytest.mark.slow  # 17 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_nan_in_one_measure_json_stops_metrics_bounds_and_figures_naming_it(tree, capsys):
    p, params, root = tree
    path = _last_measure(p, root)
    _set_raw(path, "val_ppl", "NaN")  # Python's JSON reader accepts NaN
    before = _snapshot(root / "figures") | _snapshot(root / "tables")
    for stage in ("metrics", "bounds", "figures"):
        rc, err = _cli(capsys, stage, "--params", str(params), "--results", str(root))
        assert rc == 2 and "\n" not in err, (stage, err)
        assert f"{path}: val_ppl: NaN is invalid" in err, (stage, err)
    assert not layout.fmt(layout.METRICS, root, dataset="tiny").exists(), "metrics written from a dropped value"
    assert _snapshot(root / "figures") | _snapshot(root / "tables") == before, "figures changed some outputs"


@pytest.mark.parametrize("key, raw, fragment", [
    ("val_ppl", '"abc"', 'val_ppl: "abc" is invalid (expected a number)'),
    ("loss", "true", "loss: true is invalid"),
    ("trace_L", "[1, 2]", "trace_L: a list is invalid (expected an object)"),
    ("psi_s", '{"1.0": "x"}', 'psi_s.1.0: "x" is invalid'),
    ("top_eigenvalues", '[1.0, "big"]', 'top_eigenvalues[1]: "big" is invalid'),
    ("seed", "0", "seed: 0 is invalid (expected 1, the seed of the path"),
    ("val_ppl", "null", "val_ppl: null is invalid (expected a number)"),
])
def test_wrong_types_in_a_measure_json_are_named(tree, capsys, key, raw, fragment):
    p, params, root = tree
    path = _last_measure(p, root)
    _set_raw(path, key, raw)
    for stage in ("metrics", "bounds"):
        rc, err = _cli(capsys, stage, "--params", str(params), "--results", str(root))
        assert rc == 2 and "\n" not in err and str(path) in err and fragment in err, (stage, err)


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_metrics_never_average_over_the_seeds_that_happen_to_have_a_value(tree, capsys):
    """A value one seed lacks (null: undefined) leaves the mean out instead of reporting the
    other seed's value as the mean of n_seeds = 2."""
    from villani.io.records import sealed

    p, params, root = tree
    path = _last_measure(p, root)
    path.write_text(json.dumps(sealed(dict(json.loads(path.read_text()), spectral_ratio=None))))  # as measure writes it
    for stage in ("bounds", "claims", "metrics"):  # bounds.json, the ledger name the measurements: made again
        rc, err = _cli(capsys, stage, "--params", str(params), "--results", str(root))
        assert rc == 0, err
    table = pd.read_csv(layout.fmt(layout.METRICS_TABLE, root, dataset="tiny"), dtype={"lam": str})
    row = table[(table["variant"] == "adamw") & (table["lam"] == layout.format_lam(p["train"]["lambdas"][-1]))].iloc[0]
    assert row["n_seeds"] == 2 and pd.isna(row["spectral_ratio"]) and row["val_ppl"] > 0


def _samples_read_by_fig8(p, root):
    from villani.figures.trace_histograms import chosen_runs, chosen_steps

    return chosen_runs(p)[0].path(layout.MEASURE_PARQUET, root, step=chosen_steps(p)[-1])


@pytest.mark.slow  # 6 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_measure_parquet_with_other_columns_is_named(tree, capsys):
    p, params, root = tree
    path = _samples_read_by_fig8(p, root)
    pd.read_parquet(path).rename(columns={"value": "val"}).to_parquet(path)
    rc, err = _cli(capsys, "figures", "--params", str(params), "--results", str(root))
    assert rc == 2 and "\n" not in err and f"{path}: column 'value' missing" in err, err


@pytest.mark.parametrize("change, fragment", [
    (lambda s: s.update(vocab_size="512"), 'vocab_size: "512" is invalid (expected an integer in [2, 10000000])'),
    (lambda s: s.pop("vocab_size"), "vocab_size: missing"),
    (lambda s: s.update(vocab_size=10**12), "vocab_size: 1000000000000 is invalid"),
    (lambda s: s.update(vocab_size=512.5), "vocab_size: 512.5 is invalid"),
    (lambda s: s["splits"].pop("validation"), "splits.validation: missing"),
    (lambda s: s["splits"]["train"].update(tokens=None), "splits.train.tokens: null is invalid"),
])
def test_damaged_stats_json_is_named(tree, capsys, change, fragment):
    p, params, root = tree
    path = layout.fmt(layout.DATA_STATS, root, dataset=p["data"]["name"])
    stats = json.loads(path.read_text())
    change(stats)
    path.write_text(json.dumps(stats))
    rc, err = _cli(capsys, "bounds", "--params", str(params), "--results", str(root))
    assert rc == 2 and "\n" not in err and f"{path}: {fragment}" in err, err


def test_stats_json_that_is_a_list_is_named(tree, capsys):
    p, params, root = tree
    path = layout.fmt(layout.DATA_STATS, root, dataset=p["data"]["name"])
    path.write_text("[1, 2]")
    rc, err = _cli(capsys, "bounds", "--params", str(params), "--results", str(root))
    assert rc == 2 and f"{path}: (top level): a list is invalid (expected an object)" in err, err


def test_checkpoint_metadata_of_wrong_types_is_named(tree, capsys):
    p, params, root = tree
    run = next(iter(runs(p)))
    path = run.path(layout.CKPT_META, root, step=p["train"]["steps"])
    _set_raw(path, "train_loss", '"low"')
    rc, err = _cli(capsys, "metrics", "--params", str(params), "--results", str(root))
    assert rc == 2 and "\n" not in err and f'{path}: train_loss: "low" is invalid' in err, err


# --------------------------------------------------------------------------- token blocks
@pytest.fixture
def data_tree(tiny_data_root, tmp_path):
    p = tiny_params()
    shutil.copytree(tiny_data_root / "data", tmp_path / "data")
    return p, tmp_path


def _rewrite_split(p, root, blocks, *, record_hash: bool):
    from villani.data.blocks import write_blocks
    from villani.io.atomic import sha256_file

    ds = p["data"]["name"]
    path = layout.fmt(layout.SPLIT, root, dataset=ds, split="train")
    write_blocks(path, blocks)
    if record_hash:
        stats_path = layout.fmt(layout.DATA_STATS, root, dataset=ds)
        stats = json.loads(stats_path.read_text())
        stats["splits"]["train"].update(sha256=sha256_file(path), blocks=int(blocks.shape[0]))
        stats_path.write_text(json.dumps(stats))
    return path


def _train_blocks(p, root):
    from villani.data.blocks import load_blocks

    return load_blocks(layout.fmt(layout.SPLIT, root, dataset=p["data"]["name"], split="train")).numpy()


def test_token_file_not_matching_its_recorded_hash_is_named(data_tree):
    from villani.data import load_split

    p, root = data_tree
    blocks = _train_blocks(p, root)
    blocks[0, 0] = (blocks[0, 0] + 1) % 256
    path = _rewrite_split(p, root, blocks, record_hash=False)
    with pytest.raises(ValueError, match=r"sha256 does not match splits\.train\.sha256") as e:
        load_split(p, root, "train")
    assert str(e.value).startswith(f"{path}: ")


def test_token_id_beyond_the_vocabulary_is_named(data_tree):
    from villani.data import load_split

    p, root = data_tree
    blocks = _train_blocks(p, root)
    vocab = json.loads(layout.fmt(layout.DATA_STATS, root, dataset=p["data"]["name"]).read_text())["vocab_size"]
    blocks[3, 5] = vocab
    path = _rewrite_split(p, root, blocks, record_hash=True)
    with pytest.raises(ValueError, match=rf"token id {vocab} ≥ vocab_size {vocab}") as e:
        load_split(p, root, "train")
    assert str(e.value).startswith(f"{path}: ")


def test_blocks_of_another_seq_len_are_named(data_tree, capsys):
    p, root = data_tree
    blocks = _train_blocks(p, root)
    t = blocks.shape[1]
    half = blocks[:, : t // 2].copy()
    path = _rewrite_split(p, root, np.ascontiguousarray(half), record_hash=True)
    params = root / "p.yaml"
    dump_yaml(p, params)
    rc, err = _cli(capsys, "train", "--params", str(params), "--results", str(root), "--lam",
                   str(p["train"]["lambdas"][0]), "--seed", "0", "--until", str(_first_end(p)), "--device", "cpu")
    assert rc == 2 and "\n" not in err and f"{path}: blocks of {t // 2} tokens, but data.seq_len = {t}" in err, err


def _first_end(p):
    from villani.plan.schedule import segment_ends

    return segment_ends(p["train"])[0]


def test_atomic_reader_refuses_json_nan_and_infinity(tmp_path):
    from villani.io.atomic import read_json

    for raw in ("NaN", "Infinity", "-Infinity"):
        path = tmp_path / "x.json"
        path.write_text('{"a": {"b": [1, %s]}}' % raw)
        with pytest.raises(ValueError) as e:
            read_json(path, "thing")
        assert str(e.value).startswith(f"{path}: a.b[1]: {raw} is invalid"), str(e.value)
    path.write_text('{"a": "inf"}')
    assert read_json(path) == {"a": "inf"}


@pytest.mark.slow  # 7 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_truncated_parquet_samples_are_named(tree, capsys):
    p, params, root = tree
    path = _samples_read_by_fig8(p, root)
    path.write_bytes(path.read_bytes()[:100])
    rc, err = _cli(capsys, "figures", "--params", str(params), "--results", str(root))
    assert rc == 2 and "\n" not in err and f"{path}: not a readable Parquet file" in err, err

