"""One line for every bad input of issue 40 item 7 that concerns the parameters: a quoted λ
(DVC would name its folder by the text while villani reads a number: refused, in the CLI
and under Snakemake); `villani validate` never reports from the stats of other data
(`data.seq_len: 4097`) and checks `measure.blocks` against a current train split and
`data.seq_len` against model.name's positions; a `--config` value that is wrong is blamed on
`--config`, not on params.yaml. Driven on the shipped params.yaml with the tiny values."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import copy_repo
from tests.workflow.conftest import BIN, run, write_params
from villani.cli import main
from villani.plan import layout


def _edit(path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def _validate(capsys, params, root) -> tuple[int, str, str]:
    rc = main(["validate", "--params", str(params), "--results", str(root)])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err.strip()


@pytest.mark.parametrize("old, new, named", [
    ("lambdas: [0.0, 0.01]\n  seeds", 'lambdas: [0.0, "1.2e-1"]\n  seeds', 'train.lambdas[1]: "1.2e-1" is invalid'),
    ("  lr: 0.01\n", '  lr: "0.01"\n', 'train.lr: "0.01" is invalid'),
])
def test_a_quoted_number_is_one_line(tmp_path, capsys, old, new, named):
    params = tmp_path / "params.yaml"
    write_params(params)
    _edit(params, old, new)
    rc, _, err = _validate(capsys, params, tmp_path / "results")
    assert rc == 2 and "\n" not in err, err
    assert err == f"villani: error: {params}: {named} (allowed: a number written without quotes; quoted it is " \
                  "text to YAML and to DVC, which would name a λ folder by that text)"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    work = copy_repo(tmp_path_factory.mktemp("params-numbers"))
    write_params(work / "params.yaml")
    return work


@pytest.mark.slow  # 24 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_snakemake_refuses_a_quoted_lambda_and_blames_config_values_on_config(repo):
    bad = repo / "quoted.yaml"
    shutil.copy(repo / "params.yaml", bad)
    _edit(bad, "lambdas: [0.0, 0.01]\n  seeds", 'lambdas: [0.0, "1.2e-1"]\n  seeds')
    out = run([BIN / "snakemake", "-n", "--configfile", str(bad), "--cores", "1"], cwd=repo, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and f'{bad}: train.lambdas[1]: "1.2e-1" is invalid' in text, text[-2000:]
    out = run([BIN / "snakemake", "-n", "--cores", "1", "--config", "train={lr: abc}"], cwd=repo, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-2000:]
    assert '--config train (over params.yaml): train.lr: "abc" is invalid (allowed: number > 0)' in text, text[-2000:]
    assert "params.yaml: train.lr" not in text


def test_validate_never_reports_from_stale_stats(repo, tiny_data_root, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    params = tmp_path / "params.yaml"
    shutil.copy(repo / "params.yaml", params)
    rc, out, err = _validate(capsys, params, root)
    assert rc == 0 and "covers 0.48 epochs of 400 train blocks" in out, (out, err)
    _edit(params, "seq_len: 32", "seq_len: 4097")
    rc, out, err = _validate(capsys, params, root)
    assert rc == 0 and "epochs" not in out, out
    stats = layout.fmt(layout.DATA_STATS, root, dataset="tiny")
    assert f"the split sizes are not known ({stats} is of other data parameters (data.seq_len: 32 there, 4097 " \
           "here))" in out, out
    _edit(params, "seq_len: 4097", "seq_len: 32")
    _edit(params, "  blocks: 8\n", "  blocks: 100000\n")
    rc, out, err = _validate(capsys, params, root)
    assert rc == 2 and err == "villani: error: measure.blocks: 100000 is invalid (≤ 400, the blocks of the train " \
                              f"split in {root}/data/tiny/stats.json)", err


def test_validate_checks_seq_len_against_the_pretrained_models_positions(tmp_path, capsys):
    root = tmp_path / "results"
    config = layout.fmt(layout.PRETRAINED_CONFIG, root, dataset="tiny")
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"model_type": "gpt_neo", "max_position_embeddings": 2048}))
    params = tmp_path / "params.yaml"
    write_params(params, data={"seq_len": 4097}, model={"name": "EleutherAI/gpt-neo-125m"})
    rc, _, err = _validate(capsys, params, root)
    assert rc == 2 and err == ("villani: error: data.seq_len: 4097 is invalid (≤ 2048, max_position_embeddings of "
                               f"model.name EleutherAI/gpt-neo-125m in {config})"), err


@pytest.mark.slow  # 23 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_a_configfile_is_checked_over_params_yaml_in_snakemakes_order(repo):
    """`--configfile` values win over params.yaml's: a warm-up longer than params.yaml's 24
    steps is valid when the same file sets 40 steps (checked in the reverse order, the files
    alone would fail on params.yaml's steps)."""
    over = repo / "longer.yaml"
    over.write_text("train: {warmup_steps: 30, steps: 40}\n")
    out = run([BIN / "snakemake", "-n", "--configfile", str(over), "--cores", "1"], cwd=repo, check=False)
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    out = run([BIN / "snakemake", "-n", "--configfile", str(over), "--cores", "1", "--config", "train={steps: 20}"],
              cwd=repo, check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and f"--config train (over params.yaml, {over}): train.warmup_steps: 30 is invalid" \
        in text, text[-2000:]
