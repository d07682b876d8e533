"""Adding a stage is its row, the names of its files and its work module (docs/ARCHITECTURE.md).

A copy of the repository gets a toy stage — a row in plan/stages.py, its file's name in
plan/layout.py, a work module — and nothing else: `villani dvc-yaml` writes its DVC stage,
`villani` has its command, Snakemake plans it among the workflow's targets and runs it, and a
SLURM dry run asks for the row's GPU, threads, memory and runtime."""

from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, copy_repo

BIN = Path(sys.executable).parent
TINY = "tests/configs/tiny.yaml"
TOY_FILE = 'TOY = "{root}/toy/{dataset}.json"  # the toy stage of tests/workflow/test_toy_stage.py\n'
TOY_ROW = '''    Stage("toy", ("train.seeds",), (L.PLAN,), (L.TOY,), (_SRC + "toy.py",), gpu=True, threads=4, mem_mb=1500,
          runtime=7, work="villani.toy:count_runs", help="count the runs of the plan (a toy stage)"),
'''
TOY_MODULE = '''"""A toy stage: how many runs the plan of a dataset names."""

import json

from villani.io import atomic
from villani.plan import layout


def count_runs(args) -> None:
    plan = json.loads(layout.fmt(layout.PLAN, args.results, dataset=args.dataset).read_text())
    out = layout.fmt(layout.TOY, args.results, dataset=args.dataset)
    atomic.write_text(out, json.dumps({"runs": len(plan["runs"])}) + "\\n")
    print(f"wrote {out}")
'''


def _add_toy_stage(work: Path) -> None:
    stages = work / "src/villani/plan/stages.py"
    text = stages.read_text()
    end = text.index(")\nSTAGES = ")
    stages.write_text(text[:end] + TOY_ROW + text[end:])
    layout = work / "src/villani/plan/layout.py"
    layout.write_text(layout.read_text() + "\n" + TOY_FILE)
    (work / "src/villani/toy.py").write_text(TOY_MODULE)


def _run(cmd, work: Path, timeout=900) -> str:
    env = dict(os.environ, PYTHONPATH=str(work / "src"), PATH=f"{BIN}:{os.environ['PATH']}", HF_HUB_OFFLINE="1")
    p = subprocess.run([str(c) for c in cmd], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{cmd}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p.stdout + p.stderr


def _changed(work: Path) -> set[str]:
    """The files of the copy that differ from the repository's, or are new (but what a run
    writes: results, Snakemake's metadata, DVC's lock)."""
    out = set()
    for f in work.rglob("*"):
        rel = f.relative_to(work)
        run_state = {".snakemake", "results", "__pycache__", "logs"} & set(rel.parts) or rel.parts[:2] == (".dvc", "tmp")
        if f.is_file() and not run_state:
            if not (REPO / rel).is_file() or not filecmp.cmp(f, REPO / rel, shallow=False):
                out.add(str(rel))
    return out


@pytest.mark.slow
def test_a_toy_stage_is_one_row_one_layout_name_and_one_work_module(tmp_path):
    work = copy_repo(tmp_path / "repo")
    _add_toy_stage(work)
    # the CLI: its command, from the row
    assert "count the runs of the plan" in _run([BIN / "villani", "--help"], work)
    # DVC: `villani dvc-yaml` writes its stage
    _run([BIN / "villani", "dvc-yaml"], work)
    toy = yaml.safe_load((work / "dvc.yaml").read_text())["stages"]["toy"]
    assert toy["cmd"] == "villani toy" and toy["outs"] == ["results/toy/${data.name}.json"]
    assert toy["deps"] == ["results/plan/${data.name}.json", "src/villani/toy.py"] and toy["params"] == ["train.seeds"]
    # Snakemake: a target of the workflow, planned among the others
    plan = _run([BIN / "snakemake", "-n", "--cores", "1", "--configfile", TINY], work)
    assert re.search(r"^toy\s+1$", plan, re.M), plan[-3000:]
    # a SLURM submission asks for the row's GPU, threads, memory and runtime
    slurm = _run([BIN / "snakemake", "results/toy/tiny.json", "--profile", "profiles/slurm", "-n", "--configfile", TINY],
                 work)
    job = slurm[slurm.index("rule toy:"):]
    job = job[:job.index("\n\n")]
    assert re.search(r"threads: 4\b", job) and "mem_mb=1500" in job and "runtime=7" in job and "gres=gpu:1" in job, job
    # and runs it
    _run([BIN / "snakemake", "results/toy/tiny.json", "--cores", "1", "--configfile", TINY], work)
    assert json.loads((work / "results/toy/tiny.json").read_text()) == {"runs": 3}  # λ 0, 0.01 and langevin's 0.01
    assert _changed(work) == {"src/villani/plan/stages.py", "src/villani/plan/layout.py", "src/villani/toy.py",
                              "dvc.yaml"}
