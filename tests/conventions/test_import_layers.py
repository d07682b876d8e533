"""The floors of docs/ARCHITECTURE.md hold in the code.

The test reads the floors from the document itself — its bullets "- **`unit`** —" under
"The folders of `src/villani/`, bottom to top", in order; units named in one bullet share a
floor — and checks every import statement of the package (AST, lazy imports inside
functions included): a unit imports only units on its own floor or below. Every module of
the package must have its place in the document, and the units form no import cycle — nor
do the modules: no file of the package imports, directly or through others, a file that
imports it. The document's drawing ("The layers, drawn") shows the same floors.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "villani"
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def floors() -> dict[str, int]:
    """``{unit: floor}`` from the document's bullets, bottom (0) to top."""
    text = DOC.read_text().split("## The folders of `src/villani/`, bottom to top", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for i, bold in enumerate(re.findall(r"^- \*\*(.+?)\*\*", text, flags=re.M)):
        for name in re.findall(r"`([\w.]+?)(?:/|\.py)?`", bold):
            out[name] = i
    return out


def unit(path: Path) -> str:
    """The unit a module belongs to: its top folder under villani/, or the leaf module's name."""
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def imports() -> dict[str, set[str]]:
    """``{unit: units it imports}`` over every module (absolute imports of ``villani.*``)."""
    edges: dict[str, set[str]] = {}
    for f in sorted(SRC.rglob("*.py")):
        u = unit(f)
        if u == "__init__":
            continue
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            edges.setdefault(u, set()).update(n.split(".")[1] for n in names
                                              if n.startswith("villani.") and n.split(".")[1] != u)
    return edges


def test_every_unit_has_its_floor_in_the_document():
    units = {unit(f) for f in SRC.rglob("*.py")} - {"__init__"}
    missing = sorted(units - set(floors()))
    assert not missing, f"docs/ARCHITECTURE.md names no floor for: {missing}"


def drawn_floors() -> dict[str, int]:
    """``{unit: floor}`` from the document's drawing (section "The layers, drawn"): a row
    ``│ <floor>  <unit> · <unit> …   <words> │`` per floor."""
    text = DOC.read_text().split("## The layers, drawn", 1)[1].split("\n## ", 1)[0]
    out: dict[str, int] = {}
    for floor, names in re.findall(r"^│\s+(\d+)  (\S+(?: · \S+)*)", text, flags=re.M):
        for name in names.split(" · "):
            out[name] = int(floor)
    return out


def test_the_drawing_shows_the_floors_of_the_list():
    assert drawn_floors() == floors()


def test_the_document_parses_into_floors():
    f = floors()
    assert f["curvature"] == 0 and f["cli"] == max(f.values())
    assert f["plan"] < f["io"] < f["measure"] < f["figures"] < f["claims"] < f["tracking"] < f["dag"]


def test_no_import_runs_up_a_floor():
    f = floors()
    up = {u: sorted(v for v in vs if f.get(v, -1) > f.get(u, -1)) for u, vs in imports().items()}
    assert not {u: vs for u, vs in up.items() if vs}, f"imports that run up a floor: {up}"


def test_the_engine_imports_nothing_of_the_project():
    assert not imports().get("curvature")


def test_no_import_cycle_between_units():
    edges = imports()
    seen: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(u: str, path: list[str]) -> None:
        seen[u] = 1
        for v in edges.get(u, ()):
            assert seen.get(v) != 1, f"import cycle: {' → '.join(path + [u, v])}"
            if v not in seen:
                visit(v, path + [u])
        seen[u] = 2

    for u in list(edges):
        if u not in seen:
            visit(u, [])


def test_the_metrics_stage_lives_in_tracking():
    """The metrics stage moved out of ``figures`` (it held the one import up a floor,
    ``figures → claims``); the floors above keep ``figures`` below ``claims`` and ``tracking``."""
    assert (SRC / "tracking" / "metrics.py").exists() and (SRC / "tracking" / "dvc_plots.py").exists()
    assert not (SRC / "figures" / "metrics.py").exists() and not (SRC / "figures" / "dvc_plots.py").exists()
    f = floors()
    assert f["figures"] < f["claims"] < f["tracking"] < f["dag"] < f["cli"]


def module_name(path: Path) -> str:
    """``villani.a.b`` for ``a/b.py`` and for the package ``a/b/__init__.py``."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports() -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, every import statement (lazy ones inside
    functions and relative ones included): ``import a.b`` and ``from a.b import c`` name the
    module ``a.b`` — or ``a.b.c`` where ``c`` is a module itself. A package's own
    ``__init__``, which Python runs before any of its modules, is not counted as imported
    unless it is named."""
    files = {module_name(f): f for f in SRC.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, f in files.items():
        package = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = edges.setdefault(name, set())
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    target = f"{base}.{a.name}"
                    out.add(target if target in files else base)
        out.discard(name)
        out.intersection_update(files)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        for v in edges.get(u, ()):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == u:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for u in sorted(edges):
        if u not in index:
            visit(u)
    return found


def test_no_import_circle_between_modules():
    assert not circles(module_imports()), "modules that import each other (through others): " + "; ".join(
        " ↔ ".join(c) for c in circles(module_imports()))


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    edges = module_imports()
    assert "villani.plan.budget" in edges["villani.dag.resources"]  # absolute, from-import of a module
    assert "villani.curvature.operators.hessian" in edges["villani.curvature.operators.model_hessian"]  # relative
    assert "villani.bounds.theory" in edges["villani.bounds.pac_bayes"]
