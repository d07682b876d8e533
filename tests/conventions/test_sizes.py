"""Sizes: no module of ``src/villani/`` over 450 lines, no function over 80.

A module's size is its line count; a function's, from its ``def`` line to its last line
(docstring and nested functions included, decorators not), every function and method at
any depth (AST). A module or function over a limit is split along a seam, not squeezed.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "villani"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80

# Over a limit today and left alone here: files another change owns while it is under way.
# Each entry names the limit it may exceed; remove it once the file is split.
ALLOWED: dict[str, str] = {}


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def test_no_module_over_450_lines():
    over = {_name(f): n for f in _modules() if (n := len(f.read_text().splitlines())) > MAX_MODULE_LINES
            and ALLOWED.get(_name(f)) != "module"}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them): {over}"


def test_no_function_over_80_lines():
    over = {}
    for f in _modules():
        if ALLOWED.get(_name(f)) == "function":
            continue
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    over[f"{_name(f)}:{node.lineno} {node.name}"] = n
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them): {over}"


def test_the_allow_list_names_files_that_exist():
    assert all((SRC / name).is_file() and kind in ("module", "function") for name, kind in ALLOWED.items())
