"""A stage is one row (villani.plan.stages.TABLE): the CLI's stage commands, Snakemake's
rules, dvc.yaml's stages and the job counts are made from it; the files Snakemake names for
a job lie inside what DVC names for the same stage; and no result file name is spelled
outside plan/layout.py."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, tiny_params
from villani.cli import COMMANDS
from villani.dag import dvc_yaml, rules
from villani.plan import layout
from villani.plan.runs import landscape_centres, runs
from villani.plan.stages import ARMS, STAGES, TABLE, stage

BIN = Path(sys.executable).parent


@pytest.mark.slow  # 12 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_every_row_is_a_command_a_rule_and_a_dvc_stage():
    assert set(STAGES) <= set(COMMANDS)
    out = subprocess.run([BIN / "snakemake", "--list-rules"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert set(out.stdout.split()) == {*STAGES, "all"}, out.stdout + out.stderr[-2000:]
    dvc = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert set(dvc) == {s.name + (a.suffix if s.per == "run" else "") for s in TABLE
                        for a in (ARMS if s.per == "run" else ARMS[:1])}


@pytest.mark.parametrize("name", STAGES)
def test_the_command_of_a_row_is_what_its_parser_takes(name):
    """The row's command (Snakemake's and DVC's shell line) and its options (the CLI's) agree:
    the line, its wildcards filled, parses — per step and with --all — to the values it names."""
    from villani.cli import DEVICE_COMMANDS, parse_args

    row = stage(name)
    fill = {"variant": "adamw", "lam": "0.01", "seed": "3", "step": "40"}
    parsed = {"variant": "adamw", "lam": 0.01, "seed": [3] if row.name == "train" else 3}  # --seed: several in train
    line = re.sub(r"\{(\w+)\}", lambda m: fill[m[1]], row.command).split()
    for argv in (line, re.sub(r"--[\w-]+ 40", "--all", " ".join(line)).split()):
        args = parse_args([name, "--dataset", "tiny", *argv])
        assert args.command == name and args.dataset == "tiny"
        for key in fill.keys() & set(re.findall(r"\{(\w+)\}", row.command)) - {"step"}:
            assert getattr(args, key) == parsed[key], (key, getattr(args, key))
    assert (name in DEVICE_COMMANDS) == row.gpu


def _covered(path: str, names: list[str]) -> bool:
    return any(path == n or path.startswith(n.rstrip("/") + "/") for n in names)


def _dvc_names(body: dict, p: dict, lam=None, seed=None, variant="adamw") -> list[str]:
    """A DVC stage's deps (or outs) filled for the tiny parameters and one matrix item."""
    fill = {"${data.name}": p["data"]["name"], "${train.lambdas[0]}": layout.format_lam(p["train"]["lambdas"][0]),
            "${train.seeds[0]}": str(p["train"]["seeds"][0])}
    if lam is not None:
        fill["${item.lam}"] = layout.format_lam(lam)
    if seed is not None:
        fill["${item.seed}"] = str(seed)
    out = []
    for name in body:
        for k, v in fill.items():
            name = name.replace(k, v)
        out.append(name)
    return out


@pytest.mark.parametrize("name", [s.name for s in TABLE if s.per != "datasets"])
def test_snakemakes_files_of_a_job_lie_inside_dvcs_names_for_its_stage(name):
    """The same list, two granularities: every input and output file of each job inside a
    dependency / output DVC names for that stage (a file, or its folder)."""
    p, row = tiny_params(), stage(name)
    body = dvc_yaml.stages()[name]
    if row.per == "run":
        jobs = [({"dataset": "tiny", **r.wildcards}, r.lam, r.seed) for r in runs(p, ["adamw"])]
    elif row.per == "lam":
        jobs = [({"dataset": "tiny", "lam": layout.format_lam(x)}, x, None) for x in p["landscape"]["lambdas"]]
    else:
        jobs = [({"dataset": "tiny"}, None, None)]
    for wc, lam, seed in jobs:
        deps = _dvc_names(body["deps"], p, lam, seed)
        outs = _dvc_names(body["outs"] + body.get("metrics", []), p, lam, seed)
        files = rules.inputs(p, name, wc)
        assert all(_covered(f, deps) for f in files), ([f for f in files if not _covered(f, deps)], deps)
        made = [f.format(**wc) for f in rules.outputs(p, name) if "{step}" not in f]
        assert all(_covered(f, outs) for f in made), (made, outs)


def test_a_landscape_is_centred_on_the_runs_dvc_names():
    """Every seed's run of the surface's own λ: the folder ${item.lam} names (villani dvc-yaml
    --check holds every preset to it), at step 0 and/or its last checkpoint."""
    p = tiny_params(landscape={"centers": ["init", "final"]}, train={"seeds": [0, 1]})
    for lam in p["landscape"]["lambdas"]:
        centres = landscape_centres(p, lam)
        assert [(c.kind, c.run.seed, c.step) for c in centres] == [
            ("init", 0, 0), ("init", 1, 0), ("final", 0, p["train"]["steps"]), ("final", 1, p["train"]["steps"])]
        assert {c.run.lam for c in centres} == {float(lam)}


RESULT_FILES = re.compile(r"\b(bounds|rays|surface|slopes|hvp_cost)\.(csv|json)\b")


def _literals(tree: ast.AST):
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_every_result_file_name_of_a_stage_is_spelled_in_the_layout_alone():
    """`bounds.csv`, `rays.csv`, `slopes.json`, `surface.csv` … appear as code (not prose)
    in plan/layout.py only, in src/ and workflow/."""
    found = []
    for f in sorted((REPO / "src/villani").rglob("*.py")):
        if f.name == "layout.py" and f.parent.name == "plan":
            continue
        for node in _literals(ast.parse(f.read_text())):
            text = node.value
            if RESULT_FILES.search(text) and " " not in text.strip():
                found.append(f"{f.relative_to(REPO)}:{node.lineno}: {text!r}")
    for f in [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if RESULT_FILES.search(code):
                found.append(f"{f.relative_to(REPO)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
