"""Property test: random options and files given to every ``villani`` subcommand end in
exit 0, or exit 2 with one line ``villani: error: …`` — never a traceback.

In-process (``villani.cli.main``), in a fresh folder per example, with the options of every
subcommand drawn at random: counts, seeds and λ out of range, NaN, garbage text, paths to a
missing file, an empty file, a folder, binary garbage, YAML of the wrong shape, the tiny
parameter file. ``run-lock`` (it runs its argument) is left out; ``profile install`` writes
into a temporary XDG_CONFIG_HOME. Plus named one-line reproductions of reported failures.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, TINY
from villani.cli import COMMANDS, main
from villani.plan.config import deep_merge, dump_yaml, read_yaml

_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (DEBUG|INFO|WARNING) villani[.\w]*: ")

# options each command takes (beyond the common ones), with the kind of value they want
OPTIONS = {
    "validate": ["--print"], "train": ["--variant", "--lam", "--seed", "--until", "--all"],
    "measure": ["--variant", "--lam", "--seed", "--step", "--all"], "landscape": ["--lam"],
    "profile": ["install", "--name", "--source", "--account", "--partition", "--gpu-partition"],
    "prune": ["--dry-run"],
    "diagnose": ["--model", "--data", "--text-column", "--revision", "--split", "--tokenizer", "--seq-len",
                 "--blocks", "--batch-size", "--set-seed", "--probes", "--probe-seed", "--top-k", "--lanczos-steps",
                 "--s-values", "--lam-grid", "--basis-device", "--out", "--min-distinct-tokens"],
}
COMMON = ["--params", "--results", "--dataset", "--device", "--threads", "--log-level", "--progress-interval"]
FLAGS = {"--print", "--all", "--dry-run", "install"}
TESTED = sorted(set(COMMANDS) - {"run-lock"})

FILES = {
    "missing": None, "empty": b"", "garbage": b"\x00\xff\xfe garbage \x81", "folder": "dir",
    "yaml-list": b"- 1\n- 2\n", "yaml-bad-types": b"train: {lambdas: [x], steps: -3}\nmodel: 7\n",
    "yaml-broken": b"train: {lambdas: [0.1\n", "tiny": "tiny",
}


def _materialise(kind: str, folder: Path, trees: dict) -> str:
    path = folder / f"f-{kind}"
    if kind in trees:  # a copy of a prepared tree: a results folder with tiny data, a checkpoint-like model
        if not path.exists():
            shutil.copytree(trees[kind], path)
        return str(path / trees.get(kind + "/sub", ""))
    if kind in ("results", "out"):
        return str(path)
    content = FILES[kind]
    if content == "dir":
        path.mkdir(exist_ok=True)
    elif content == "tiny":
        dump_yaml(deep_merge(read_yaml(REPO / "params.yaml"), read_yaml(TINY)), path)
    elif content is not None:
        path.write_bytes(content)
    return str(path)


garbage = st.one_of(st.integers(-3, 10**12).map(str), st.sampled_from(["nan", "inf", "-0", "1e400", ""]),
                    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=12),
                    st.sampled_from(sorted(FILES)).map(lambda k: ("file", k)))
files = st.sampled_from(sorted(FILES)).map(lambda k: ("file", k))
# per option: mostly plausible values (so a command gets past parsing into its own checks), some garbage
PLAUSIBLE = {
    "--params": st.one_of(st.just(("file", "tiny")), files), "--results": st.sampled_from([("file", "results"), ("file", "results"), ("file", "garbage")]),
    "--dataset": st.sampled_from(["tiny", "ptb"]), "--device": st.just("cpu"), "--threads": st.just("1"),
    "--log-level": st.sampled_from(["WARNING", "ERROR", "verbose"]), "--progress-interval": st.sampled_from(["0.5", "0"]),
    "--variant": st.sampled_from(["adamw", "langevin", "adamw_lr0.1", "bogus"]),
    "--lam": st.sampled_from(["0.01", "0.0", "0.5", "-1", "nan"]), "--seed": st.sampled_from(["0", "1", "-1"]),
    "--step": st.sampled_from(["0", "6", "12", "24", "7", "-1"]), "--until": st.sampled_from(["12", "24", "7", "0"]),
    "--model": st.sampled_from([("file", "model"), ("file", "model"), ("file", "folder"), ("file", "garbage")]),
    "--data": st.sampled_from(["builtin:pydoc", "builtin:pydoc", "files:*.nothing", "hf-disk:/nonexistent", "x"]),
    "--tokenizer": st.sampled_from([("file", "model"), ("file", "results-data"), ("file", "folder"), "gpt2"]),
    "--split": st.sampled_from(["train", "validation", "test", "dev"]),
    "--seq-len": st.sampled_from(["16", "32", "1", "100000"]), "--blocks": st.sampled_from(["1", "2", "0", "10000"]),
    "--batch-size": st.sampled_from(["1", "2", "0"]), "--probes": st.sampled_from(["2", "3", "1", "100001"]),
    "--top-k": st.sampled_from(["1", "2", "0"]), "--lanczos-steps": st.sampled_from(["2", "4", "1"]),
    "--s-values": st.sampled_from(["1", "0.5", "0", "-2"]), "--lam-grid": st.sampled_from(["0:1:3", "1e-3:1:4", "0.1"]),
    "--min-distinct-tokens": st.sampled_from(["1", "16", "100000"]),
    "--out": st.sampled_from([("file", "out"), ("file", "garbage")]),
}


def value_for(opt, clean: bool):
    if opt not in PLAUSIBLE:
        return garbage
    return PLAUSIBLE[opt] if clean else st.one_of(PLAUSIBLE[opt], PLAUSIBLE[opt], garbage)


@st.composite
def command_lines(draw, cmd: str):
    clean = draw(st.sampled_from([True, False]))  # half the lines: plausible values only, to reach each command's own checks
    pool = OPTIONS.get(cmd, []) + COMMON
    if cmd == "diagnose":
        pool = [o for o in pool if o not in ("--params", "--dataset")]
    opts = draw(st.lists(st.sampled_from(pool), max_size=4))
    if cmd == "diagnose":
        opts += ["--model", "--data", "--probes", "--blocks", "--seq-len", "--lanczos-steps"]
    elif cmd in ("train", "measure"):
        opts = ["--params", "--results", "--lam", "--seed"] + opts + ["--all" if draw(st.sampled_from([0, 1])) else
                                                                        ("--until" if cmd == "train" else "--step")]
    elif cmd == "profile":
        opts = ["install"] + opts
    elif draw(st.sampled_from([True, True, True, False])):
        opts = ["--params", "--results"] + opts + (["--lam"] if cmd == "landscape" else [])
    argv = [cmd]
    for opt in opts:
        argv.append(opt)
        if opt not in FLAGS:
            argv.append(draw(value_for(opt, clean)))
    return argv


def _run(argv, folder: Path, capsys, trees: dict | None = None) -> tuple[int, str]:
    argv = [_materialise(a[1], folder, trees or {}) if isinstance(a, tuple) else a for a in argv]
    try:
        rc = main(argv)
    except SystemExit as e:  # --help, --version
        rc = e.code
    return rc, capsys.readouterr().err


def _check(rc, err, argv):
    lines = [ln for ln in err.strip().splitlines() if not _LOG_LINE.match(ln)]
    assert rc in (0, 2), (argv, rc, err[-2000:])
    if rc == 2:
        assert len(lines) == 1 and lines[0].startswith("villani: error: "), (argv, err[-2000:])


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("VILLANI_LOG_LEVEL", "WARNING")
    monkeypatch.delenv("VILLANI_TRACEBACK", raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def trees(tmp_path_factory, tiny_data_root):
    """A results folder with the tiny corpus tokenized, and a checkpoint-like model folder
    (a tiny GPT-Neo of the tiny vocabulary, its tokenizer saved beside it)."""
    from tests.conftest import tiny_params
    from villani.data.tokenizer import load_tokenizer
    from villani.model.causal_lm import build_model

    base = tmp_path_factory.mktemp("cli-trees")
    p = tiny_params()
    data = tiny_data_root / "data" / "tiny"
    tok = load_tokenizer(data)
    model = build_model(p["model"], len(tok), p["data"]["seq_len"], seed=0, eos_token_id=tok.eos_token_id)
    model.save_pretrained(base / "model")
    tok.save_pretrained(base / "model")
    return {"results": tiny_data_root, "results-data": tiny_data_root, "results-data/sub": "data/tiny",
            "model": base / "model"}


@pytest.mark.parametrize("cmd", TESTED)
@pytest.mark.slow  # 19 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_random_command_lines_exit_0_or_one_line(cmd, sandbox, trees, capsys, monkeypatch):
    @settings(max_examples=6, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(argv=command_lines(cmd))
    def lines(argv):
        folder = Path(tempfile.mkdtemp(dir=sandbox))
        monkeypatch.chdir(folder)
        rc, err = _run(argv, folder, capsys, trees)
        _check(rc, err, argv)

    lines()


@pytest.mark.parametrize("argv, named", [
    (["--threads", "-1", "validate"], "--threads: -1 is invalid (an integer ≥ 1"),
    (["--device", "foo", "validate"], "--device: 'foo' is not a torch device"),
    (["train", "--lam", "nan", "--seed", "0", "--all"], "--lam: nan is invalid (a finite number ≥ 0)"),
    (["train", "--lam", "0.01", "--seed", "-1", "--all"], "--seed: -1 is invalid (an integer ≥ 0)"),
    (["measure", "--lam", "0.01", "--seed", "0", "--step", "x"], "--step: 'x' is not an integer"),
    (["nosuch"], "COMMAND: invalid choice: 'nosuch'"),
])
def test_each_bad_option_is_one_line_naming_it(sandbox, capsys, monkeypatch, argv, named):
    monkeypatch.chdir(sandbox)
    rc, err = _run(argv, sandbox, capsys)
    assert rc == 2 and err.strip().startswith(f"villani: error: {named}") and "\n" not in err.strip(), err


def test_cuda_without_cuda_is_one_line_before_any_work(sandbox, capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    monkeypatch.chdir(sandbox)
    rc, err = _run(["--device", "cuda", "measure", "--lam", "0.01", "--seed", "0", "--step", "0",
                    "--params", ("file", "tiny")], sandbox, capsys)
    assert rc == 2 and "\n" not in err.strip(), err
    assert err.strip().startswith("villani: error: --device: 'cuda' asked for, but ") and "torch" in err
    assert not (sandbox / "results").exists()  # nothing was started


def test_every_subcommand_help_opens_with_its_description_without_markup(capsys):
    from villani.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        text = parser.format_help()
        assert parser.description, name
        assert "``" not in text and ":func:" not in text and ":mod:" not in text, name
    diagnose = sub.choices["diagnose"].format_help()
    assert "--params" not in diagnose and "--dataset" not in diagnose and "--probes" in diagnose
    assert "``" not in build_parser().format_help()


def test_disk_full_names_the_file_being_written(tmp_path, monkeypatch):
    """ENOSPC while a figure's bytes are written (no file name on the error): the one line
    names the figure, and the older file is intact."""
    import errno

    from villani.cli import _one_line
    from villani.io import atomic

    target = tmp_path / "figures" / "fig1.png"
    atomic.write_bytes(target, b"old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as e:
        atomic.write_bytes(target, b"new figure")
    assert _one_line(e.value) == f"{target}: no space left on device; earlier results are intact (writes are atomic)"
    assert target.read_bytes() == b"old" and not list(target.parent.glob(".*.tmp"))


def test_the_probe_bound_is_the_parameter_files():
    from villani.cli import options as cli_options
    from villani.measure import diagnose_data
    from villani.plan.config import load_schema

    bound = load_schema()["properties"]["measure"]["properties"]["num_probes"]["maximum"]
    assert cli_options.MAX_PROBES == diagnose_data.MAX_PROBES == bound


def test_a_missing_file_says_which_command_writes_it(tmp_path):
    """The command that writes the file, for its dataset and results folder
    (villani.plan.writers; tests/hardening/test_suggested_commands.py runs such lines)."""
    from villani.data.blocks import load_blocks
    from villani.io.results import read_stats
    from villani.plan.writers import use_params

    use_params(None)  # as a library call sees it (a CLI run in this process set its own files)
    data = tmp_path / "results" / "data" / "tiny"
    with pytest.raises(ValueError, match=r"stats\.json: data stats not found; run `villani tokenize --results "
                                         r"\S+/results --dataset tiny` \(or the workflow\)$"):
        read_stats(data)
    with pytest.raises(FileNotFoundError, match=r"train\.parquet: blocks file not found; run `villani tokenize "
                                                r"--results \S+/results --dataset tiny` \(or the workflow\)$"):
        load_blocks(data / "train.parquet")
