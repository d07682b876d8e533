"""Shared fixtures: the tiny parameter set and a tokenized tiny corpus."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "configs" / "tiny.yaml"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One torch thread everywhere — in this process and in every `villani`/Snakemake/SLURM
# subprocess (they inherit the variable): float reductions, hence "bit-identical", depend
# on the thread count, and two xdist workers already use both cores.
os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    import torch

    torch.set_num_threads(1)
    yield


def documentation() -> str:
    """What a user reads: README.md and every page of the documentation site (``docs/**/*.md``),
    joined — where a test finds a command or a number the documentation prints, wherever it lives."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n\n".join(p.read_text(encoding="utf-8") for p in pages if "_build" not in p.parts)


def tiny_params(**overrides):
    """params.yaml overlaid with tests/configs/tiny.yaml and then ``overrides`` (group → dict)."""
    from villani.plan.config import deep_merge, read_yaml, resolve

    doc = deep_merge(read_yaml(REPO / "params.yaml"), read_yaml(TINY))
    return resolve(deep_merge(doc, overrides), source="tiny")


@pytest.fixture(scope="session")
def tiny_data_root(tmp_path_factory) -> Path:
    """A results root with the tiny corpus tokenized (shared, read-only for tests)."""
    from villani.data import tokenize
    from villani.plan import layout

    root = tmp_path_factory.mktemp("tiny-results")
    p = tiny_params()
    tokenize(p["data"], layout.fmt(layout.DATA_DIR, root, dataset=p["data"]["name"]))
    return root


def copy_repo(dest: Path) -> Path:
    """Copy the tracked (and untracked, not ignored) files of the repo into ``dest``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            (dest / f).write_bytes(src.read_bytes())
            (dest / f).chmod(src.stat().st_mode)
    page = REPO / "vega" / "page.html"  # built by `make install` (git-ignored): DVC's plots template
    if page.is_file():
        (dest / "vega").mkdir(exist_ok=True)
        (dest / "vega" / "page.html").write_bytes(page.read_bytes())
        (dest / ".dvc" / "config.local").write_text("[plots]\n    html_template = ../vega/page.html\n")  # make install's
    return dest
