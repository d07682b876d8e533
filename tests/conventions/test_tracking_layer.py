"""The floors around ``tracking/`` hold (docs/ARCHITECTURE.md): ``figures`` imports neither
``claims`` nor ``tracking`` (the metrics stage moved out of it); ``tracking`` imports
nothing above it (``dag``, ``cli``); ``plan`` (with the stage table) imports no folder
that reads results. Checked on the source's import statements (AST), lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "villani"

FORBIDDEN = {
    "figures": {"claims", "tracking", "dag", "cli"},
    "tracking": {"dag", "cli"},
    "plan": {"io", "data", "training", "measure", "bounds", "figures", "claims", "tracking", "dag", "cli"},
}


def _imported_folders(path: Path) -> set[str]:
    """The ``villani.<folder>`` names ``path`` imports anywhere (top level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        out |= {n.split(".")[1] for n in names if n.startswith("villani.") and n.count(".") >= 1}
    return out


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_import_runs_up_a_floor(folder):
    bad = {str(f.relative_to(SRC)): sorted(_imported_folders(f) & FORBIDDEN[folder])
           for f in sorted((SRC / folder).rglob("*.py"))}
    assert not {f: b for f, b in bad.items() if b}


def test_the_metrics_stage_lives_in_tracking():
    assert (SRC / "tracking" / "metrics.py").exists() and (SRC / "tracking" / "dvc_plots.py").exists()
    assert not (SRC / "figures" / "metrics.py").exists() and not (SRC / "figures" / "dvc_plots.py").exists()
