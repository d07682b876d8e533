r"""Where a claim is declared: :func:`claim` next to the function that computes it.

Each module of :mod:`villani.claims` (one per figure or table of the paper) declares its
claims with the :func:`claim` decorator on their computation; :func:`claims` gives every
claim of a parameter set in registry order (the figure modules, then declaration order), and
:func:`catalogue` the list the docs and the tests read. A *family* (one row per λ or
update rule, e.g. Fig 7's direction per run) is declared with :func:`claim_family`, whose
function returns its claims for the params; its catalogue entry carries the id pattern.

A claim's computation takes a :class:`~villani.claims.catalogue.context.Context` and returns a
:class:`Measured`: the interval of its statistic (``None``: no statistic, the note says
why), where it was measured, the paper-λ match it used, and optionally one interval per
independent *unit* (a ray): then the verdict is per unit (:func:`villani.claims.catalogue.verdict.unit_verdict`).
``testable=False`` marks a claim that this scale cannot decide (the note says what would);
``reported=False`` a sentence of the paper that announces what it never reports (verdict
:data:`~villani.claims.catalogue.verdict.NOT_A_RESULT`; the note quotes where the paper says so).

**Class.** A claim declares its *basis*: :data:`ARITHMETIC` (decided from the paper's own
numbers, definitions and equations — :mod:`villani.claims.catalogue.paper` — at any scale, before any
run) or :data:`MEASURED` (a statement about our runs). The row's class (:func:`row_class`)
follows from the basis and the computation's ``testable``: *arithmetic*, *measured here*,
or *needs scale* (a measured claim this scale cannot decide; ``Measured.decides`` says
what would, ``Measured.price_gpu_h`` its price in GPU-hours, :mod:`villani.claims.catalogue.price`).

**Table.** A row that is not a claim of the paper but a finding of ours (the theory's own
update rule at β = 1/λ, Theorem 2 on our runs, Fig 7's direction under update rules the
paper did not run) is declared with ``table=FINDINGS``: it goes to the findings table
(its own CSV and report section) and is never counted as the paper's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from villani.claims.catalogue.verdict import Region
from villani.plan.paper_lambda import LambdaMatch
from villani.statistics.intervals import Interval

__all__ = ["Measured", "Claim", "claim", "claim_family", "claims", "catalogue", "catalogue_markdown", "write_catalogue",
           "MODULES", "ARITHMETIC", "MEASURED", "NEEDS_SCALE", "CLASSES", "PAPER", "FINDINGS", "row_class"]

#: The claim modules, in the order of the paper (their import registers their claims): the
#: premises of the theory and its derivation first, tested before their consequences.
MODULES = ("premises", "derivation", "fig2", "fig3", "fig4", "fig5", "noise", "fig6", "fig7", "fig8", "table3",
           "trace_numbers", "scale")

#: A claim's basis, and the row classes (the ``class`` column).
ARITHMETIC, MEASURED, NEEDS_SCALE = "arithmetic", "measured here", "needs scale"
CLASSES = (ARITHMETIC, MEASURED, NEEDS_SCALE)
#: Which table a row belongs to: the paper's claims, or our findings.
PAPER, FINDINGS = "paper", "findings"


@dataclass(frozen=True)
class Measured:
    """What a claim's computation returns (see the module docstring)."""

    interval: Interval | None
    measured_on: str
    note: str = ""
    match: LambdaMatch | None = None
    units: tuple[tuple[str, Interval], ...] = ()
    testable: bool = True
    excluded: tuple[str, ...] = ()
    decides: str = ""
    price_gpu_h: float | None = None
    p_value: float | None = None
    reported: bool = True


@dataclass(frozen=True)
class Claim:
    """A quantitative claim of the paper (or, ``table=FINDINGS``, a finding of ours) and how it is tested."""

    id: str
    source: str
    statement: str
    paper_value: str
    statistic: str
    region: Region
    compute: Callable[[Any], Measured]
    module: str = ""
    basis: str = MEASURED
    table: str = PAPER


def row_class(c: Claim, got: Measured) -> str:
    """*arithmetic* for an arithmetic basis; else *measured here*, or *needs scale* when this
    scale cannot decide the claim (``got.testable`` False)."""
    if c.basis == ARITHMETIC:
        return ARITHMETIC
    return MEASURED if got.testable else NEEDS_SCALE


_STATIC: list[Claim] = []
_FAMILIES: list[tuple[dict, Callable[[Mapping], list[Claim]]]] = []


def claim(id: str, source: str, statement: str, paper_value: str, statistic: str, region: Region, *,
          basis: str = MEASURED, table: str = PAPER):
    """Register the decorated function ``f(ctx) -> Measured`` as the computation of one claim."""
    if basis not in (ARITHMETIC, MEASURED) or table not in (PAPER, FINDINGS):
        raise ValueError(f"claim {id!r}: basis {basis!r} / table {table!r} (allowed: {ARITHMETIC!r} or "
                         f"{MEASURED!r}; {PAPER!r} or {FINDINGS!r})")

    def register(fn):
        if any(c.id == id for c in _STATIC):
            raise ValueError(f"claim id {id!r} declared twice")
        _STATIC.append(Claim(id, source, statement, paper_value, statistic, region, fn, fn.__module__, basis, table))
        return fn
    return register


def claim_family(id_pattern: str, source: str, statement: str, paper_value: str, statistic: str, region: Region, *,
                 table: str = PAPER):
    """Register ``f(params) -> list[Claim]`` (one claim per λ, update rule…); ``id_pattern`` documents its ids."""
    def register(fn):
        _FAMILIES.append(({"id": id_pattern, "source": source, "statement": statement, "paper_value": paper_value,
                           "statistic": statistic, "region": region.text, "module": fn.__module__,
                           "basis": MEASURED, "table": table}, fn))
        return fn
    return register


def _load() -> None:
    for name in MODULES:
        importlib.import_module(f"villani.claims.catalogue.{name}")


def _order(module: str) -> int:
    return MODULES.index(module.rsplit(".", 1)[-1])


def claims(params: Mapping) -> list[Claim]:
    """Every claim for this parameter set, in the order of the paper."""
    _load()
    out = [(c.module, i, c) for i, c in enumerate(_STATIC)]
    for j, (meta, fn) in enumerate(_FAMILIES):
        out += [(meta["module"], 10_000 + 100 * j + k, c) for k, c in enumerate(fn(params))]
    out.sort(key=lambda t: (_order(t[0]), t[1]))
    ids = [c.id for _, _, c in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate claim ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return [c for _, _, c in out]


def catalogue() -> list[dict]:
    """One entry per declared claim or family (id or id pattern, source, statement, statistic,
    region, module): ``docs/claims.md``'s list and the tests' id list."""
    _load()
    rows = [{"id": c.id, "source": c.source, "statement": c.statement, "paper_value": c.paper_value,
             "statistic": c.statistic, "region": c.region.text, "module": c.module, "basis": c.basis,
             "table": c.table} for c in _STATIC]
    rows += [meta for meta, _ in _FAMILIES]
    return sorted(rows, key=lambda r: _order(r["module"]))


CATALOGUE_START, CATALOGUE_END = "<!-- claims-catalogue:start -->", "<!-- claims-catalogue:end -->"


def catalogue_markdown() -> str:
    """The claim list of ``docs/claims.md`` (a Markdown table), from :func:`catalogue`."""
    def cell(x: str) -> str:
        return x.replace("|", "\\|")

    lines = []
    for table, head in ((PAPER, "The paper's claims"), (FINDINGS, "Our findings (never counted as the paper's)")):
        lines += [f"**{head}**", "", "| id | basis | paper | statistic | region (claimed) | module |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| `{r['id']}` | {r['basis']} | {cell(r['source'])}: {cell(r['statement'])} | "
                  f"{cell(r['statistic'])} | {cell(r['region'])} | `{r['module'].rsplit('.', 1)[-1]}` |"
                  for r in catalogue() if r["table"] == table]
        lines += [""]
    return "\n".join(lines[:-1]) + "\n"


def write_catalogue(path) -> None:
    """Put :func:`catalogue_markdown` between the catalogue markers of ``path`` (docs/claims.md)."""
    from villani.io.atomic import replace_marked

    replace_marked(path, CATALOGUE_START, CATALOGUE_END, catalogue_markdown())
