"""Typed reads: no ``int(...)``/``float(...)`` around a read of the resolved parameters.

:func:`villani.plan.config.resolve` gives every value the type its schema key has
(integers are ints, numbers floats), so a cast on a parameter read only hides a value that
did not come through it. A value that really is text — a Snakemake wildcard, a CLI
argument, a variant's name — is converted once where it enters (argparse's ``type=``, the
wildcard's parser), never at every read.

The scan is of the source's syntax (AST), function by function: a *parameter read* is a
read of a key of ``params.schema.yaml`` (``x["k"]``, ``x.get("k", …)``, ``x.k``) on a
parameter value — a name ``params``/``p``, an argument annotated ``Params``, a
section argument annotated ``Params``/``Mapping`` under a section's name (``me``, ``la``…),
``….params``, what ``variant_params``/``dataset_params``/``resolve`` return, a name or
``self.name`` assigned from one of those (and ``x.name`` of the same module), or an element
of a parameter list it iterates.
A cast of such a read, or of a name bound to one, is reported; :data:`NOT_PARAMETERS`
names each remaining match that is not one, and why.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import yaml

SRC = Path(__file__).resolve().parents[2] / "src" / "villani"
ROOTS = {"params", "p"}
SECTION_NAMES = {"me", "la", "fi", "cl", "bo", "tr", "t", "r", "ck", "lv", "train", "measure", "rays", "landscape",
                 "figures", "claims", "bounds", "data", "model_cfg", "sw"}
PARAM_CALLS = {"variant_params", "dataset_params", "resolve", "load_params", "resolve_workflow"}

#: Matches of the scan that are not casts of a parameter: "file: cast" → why.
NOT_PARAMETERS: dict[str, str] = {
    "plan/config.py: float(lam)": "the refusal of an integer λ (DVC names folders by its text) shows the float to "
                                  "write instead: it reads the document as written, before numbers are made floats",
}


def _schema_keys() -> tuple[set[str], set[str]]:
    schema = yaml.safe_load((SRC / "schemas" / "params.schema.yaml").read_text())
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            keys.update(node.get("properties") or {})
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return keys, set(schema["properties"])


KEYS, GROUPS = _schema_keys()


def _read(node: ast.AST) -> tuple[str, ast.AST, str] | None:
    """(key, the value it is read from, how: key/get/attr) of ``x["k"]``, ``x.get("k", …)``, ``x.k``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value, node.value, "key"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value, node.func.value, "get"
    if isinstance(node, ast.Attribute):
        return node.attr, node.value, "attr"
    return None


class _Function:
    """The parameter values of one function: names, ``self.`` attributes, list elements."""

    def __init__(self, fn: ast.FunctionDef, attrs: set[str]):
        self.names, self.attrs, self.elements = set(), attrs, set()
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            ann = ast.unparse(a.annotation) if a.annotation is not None else ""
            if a.arg in ROOTS or "Params" in ann or (a.arg in SECTION_NAMES and "Mapping" in ann):
                self.names.add(a.arg)
        nodes = list(ast.walk(fn))
        for _ in range(3):  # assignments in any order
            for n in nodes:
                self._bind(n)

    def _bind(self, n: ast.AST) -> None:
        if isinstance(n, ast.Assign):
            pairs = zip(n.targets[0].elts, n.value.elts) if isinstance(n.targets[0], ast.Tuple) and isinstance(
                n.value, ast.Tuple) else [(n.targets[0], n.value)]
            for target, value in pairs:
                if isinstance(target, ast.Name) and self.is_param(value):
                    self.names.add(target.id)
        elif isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) and self.is_param(n.iter):
            self.elements.add(n.target.id)

    def is_param(self, node: ast.AST) -> bool:
        """Whether ``node`` evaluates to (part of) the parameters."""
        if isinstance(node, ast.Name):
            return node.id in self.names or node.id in ROOTS
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PARAM_CALLS:
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in self.attrs:
            return True  # self.t, or run.t of the same class
        if isinstance(node, ast.Attribute) and node.attr == "params":
            return True
        read = _read(node)
        if read is not None:
            key, base, _ = read
            return key in KEYS and self.is_param(base)
        if isinstance(node, ast.Subscript):  # an item of a parameter list
            return self.is_param(node.value)
        return False

    def is_read(self, node: ast.AST) -> bool:
        """A parameter value read here, or a name bound to one."""
        if isinstance(node, ast.Name):
            return node.id in self.names or node.id in self.elements
        return self.is_param(node) and not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name))


def _self_attrs(tree: ast.AST) -> set[str]:
    """``self.x`` assigned a parameter value anywhere in the module (``self.t = params["train"]``)."""
    out: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            f = _Function(fn, set())
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                                and f.is_param(n.value):
                            out.add(t.attr)
    return out


def _is_cast(n: ast.AST, f: _Function) -> bool:
    """``int(read)``/``float(read)``, or ``map(int|float, parameter list)``."""
    if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords):
        return False
    if n.func.id in ("int", "float") and len(n.args) == 1:
        return f.is_read(n.args[0])
    return n.func.id == "map" and len(n.args) == 2 and isinstance(n.args[0], ast.Name) \
        and n.args[0].id in ("int", "float") and f.is_param(n.args[1])


def scan(src: Path = SRC) -> tuple[list[str], Counter]:
    """(every cast of a parameter read as ``file:line: cast``, reads of schema keys by how)."""
    casts, reads = set(), set()
    for path in sorted(src.rglob("*.py")):
        name = path.relative_to(src).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        attrs = _self_attrs(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            f = _Function(fn, attrs)
            for n in ast.walk(fn):
                if _is_cast(n, f):
                    casts.add((name, n.lineno, ast.unparse(n)))
                read = _read(n)
                if read is not None and read[0] in KEYS and f.is_param(read[1]):
                    reads.add((name, n.lineno, n.col_offset, read[2]))
    return [f"{n}:{line}: {text}" for n, line, text in sorted(casts)], Counter(how for *_, how in reads)


def _unexplained(casts: list[str]) -> list[str]:
    return [c for c in casts if _entry(c) not in NOT_PARAMETERS]


def _entry(cast: str) -> str:
    """``file: cast`` (the line number left out, so an edit above it keeps the entry)."""
    name, rest = cast.split(":", 1)
    return f"{name}: {rest.split(': ', 1)[1]}"


def test_no_cast_on_a_parameter_read():
    left = _unexplained(scan()[0])
    assert not left, ("casts of schema-typed parameters (resolve() already gives each value its type: read it as it "
                      "is, or convert text once where it enters):\n" + "\n".join(left))


def test_the_allow_lists_name_what_is_there():
    casts = scan()[0]
    stale = set(NOT_PARAMETERS) - {_entry(c) for c in casts}
    assert not stale, f"NOT_PARAMETERS names casts that are gone: {sorted(stale)}"


def test_the_scan_finds_a_cast_that_comes_back(tmp_path):
    """The scan is not vacuous: the casts this change removed, written again, are found."""
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "params.schema.yaml").write_text((SRC / "schemas" / "params.schema.yaml").read_text())
    (tmp_path / "stage.py").write_text(
        "def run(params, root):\n"
        "    r, me = params['rays'], params.measure\n"
        "    a = int(r['points']) + int(me.get('min_probes', 8)) + float(params.rays.span)\n"
        "    return [float(s) for s in me['s_values']], a, int(root), float(me.batch_size_of)\n")
    casts, reads = scan(tmp_path)
    assert sorted(c.split(": ", 1)[1] for c in casts) == sorted([
        "int(r['points'])", "int(me.get('min_probes', 8))", "float(params.rays.span)", "float(s)"])
    assert reads == Counter({"key": 3, "get": 1, "attr": 2})
