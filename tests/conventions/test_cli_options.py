"""Top-level options are honoured; ``--version``."""

from __future__ import annotations

import pytest

from villani import __version__
from villani.cli import main, parse_args
from tests.conftest import REPO


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"villani {__version__}"


def test_global_options_are_not_overwritten_by_the_subcommand():
    a = parse_args(["--params", "a.yaml", "--results", "out", "--threads", "3", "validate"])
    assert (a.params, a.results, a.threads) == (["a.yaml"], "out", 3)
    b = parse_args(["--params", "a.yaml", "--results", "out", "validate", "--params", "b.yaml", "--results", "o2"])
    assert (b.params, b.results) == (["a.yaml", "b.yaml"], "o2")
    c = parse_args(["validate"])
    assert (c.params, c.results, c.threads, c.traceback) == (None, "results", None, False)


def test_global_params_file_is_the_one_validated(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  lambdas: [-0.1]\n")
    assert main(["--params", str(bad), "validate"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"villani: error: {bad}: train.lambdas[0]: -0.1 is invalid (allowed: number ≥ 0)"
