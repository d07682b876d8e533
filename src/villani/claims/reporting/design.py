r"""One factor at a time between two designs: the chain of ledgers a sensitivity analysis reads.

Two parameter sets — the main design (``params.yaml``: 4 λ × 2 seeds × 240 steps, three update
rules) and another (``configs/strong.yaml``: 5 λ × 4 seeds × 600 steps, AdamW only) — differ in
several factors at once, so a verdict that differs between their ledgers cannot be attributed
to any one of them. :func:`chain` puts designs between them, each differing from the one
before in **one** factor, every one computed from runs that exist (nothing is trained):

1. *update rules* — the main design without the variants the other does not run;
2. *λ grid* — only its λ whose decay budget λ·η·T matches one of the other's (within
   :data:`villani.plan.paper_lambda.TOLERANCE`: the paper-matched λ both designs ran);
3. *seeds* — only the seeds both ran (when the main design has seeds the other lacks);
4. *training* — the other design's runs at those budgets and seeds: its steps and every other
   key its file changes (the link names them: warm-up, checkpoints, …); its λ differ from the
   main design's only so that λ·η·T stays the same;
5. *seeds* — the other design's seeds;
6. *λ* — the other design's remaining λ, one at a time, smallest first;
7. *update rules* — the variants the other design runs and the main one does not.

A design reads the results tree of its parameter set with λ and seeds restricted: result
paths and the training digest hold no λ list and no seed list (:mod:`villani.plan.digest`),
so the restricted parameters read the same files, checked against the same checkpoints; the
bounds rows, built run by run (:mod:`villani.bounds.table`), are those of the design's runs
(:class:`DesignContext`). Each design's ledger is :func:`villani.claims.reporting.ledger.ledger` of its
results; a verdict that changes between neighbours is attributed to that link's factor, and a
row whose verdict differs between the ends of the chain is attributed to the links where it
changed (:func:`attribution`). Within every design all λ share its seeds, steps, data and
measurement — the design is a grid — and the chain records whether the two corpora's token
files are identical (:func:`same_data`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from villani.claims.reporting import power
from villani.claims.catalogue.context import Context
from villani.claims.reporting.ledger import ledger
from villani.claims.catalogue.registry import MEASURED
from villani.io.atomic import sha256_file
from villani.io.results import bounds_frame
from villani.plan import layout
from villani.plan.config import resolve
from villani.plan.digest import differing_keys
from villani.plan.frozen import Params
from villani.plan.paper_lambda import TOLERANCE, decay_budget, match
from villani.plan.runs import runs

__all__ = ["Design", "DesignContext", "chain", "chain_doc", "design_doc", "flips", "attribution", "same_data",
           "ARMS", "FACTORS"]

#: The update rules beside AdamW (each ``train.<arm>.lambdas``).
ARMS = ("adamw_noise", "adam_l2", "langevin")
#: The factors a link can change, in the order of the chain.
FACTORS = ("update rules", "λ grid", "seeds", "training", "λ")
#: Keys that say which runs a design has (a factor of their own) or only name it.
_RUN_SET = ("train.lambdas", "train.seeds", "train.sweep.lr", "train.sweep.warmup_steps", "landscape.lambdas",
            "data.name", *(f"train.{a}.lambdas" for a in ARMS))


@dataclass(frozen=True)
class Design:
    """One design of the chain: its parameters (what its ledger reads), those of the results tree
    it reads (``tree``), the factor that changed from the design before and how (``change``)."""

    name: str
    params: Params
    tree: Params
    factor: str = ""
    change: str = ""


class DesignContext(Context):
    """The results a design's ledger reads: its runs' measurements, and the bounds rows of its runs
    out of the tree's ``bounds.json`` (checked against every measurement of the tree)."""

    def __init__(self, design: Design, root):
        super().__init__(design.params, root)
        self.tree = design.tree

    @property
    def b(self):
        if self._b is None:
            b = bounds_frame(self.tree, self.root)
            keep = {(r.variant, float(r.lam), int(r.seed)) for r in runs(self.params)}
            mask = [(v, float(lam), int(s)) in keep for v, lam, s in zip(b["variant"], b["lam"], b["seed"])]
            self._b = b[mask].reset_index(drop=True)
        return self._b


def _with(p: Mapping, edits: Mapping[str, object]) -> Params:
    """``p`` with dotted keys set (``{"train.seeds": [0, 1]}``), resolved again."""
    d = p.to_dict() if hasattr(p, "to_dict") else dict(p)
    for dotted, value in edits.items():
        node = d
        *head, last = dotted.split(".")
        for part in head:
            node = node[part]
        node[last] = value
    return resolve(d)


def _budget(p: Mapping, lam: float) -> float:
    return decay_budget(lam, p["train"]["lr"], p["train"]["steps"])


def _same_budget(p: Mapping, lam: float, q: Mapping, other: float) -> bool:
    a, b = _budget(p, lam), _budget(q, other)
    return a == b == 0.0 or (a > 0 and b > 0 and abs(math.log(a / b)) <= math.log(TOLERANCE))


def _lams(p: Mapping) -> list[float]:
    return list(p.train.lambdas)


def _lam_text(p: Mapping, lams: Sequence[float]) -> str:
    return ", ".join(f"{x:g} ({_budget(p, x):.2g})" for x in lams)


def _changed(a: Mapping, b: Mapping) -> str:
    """Every key but the run set whose value differs between two parameter sets: ``key a → b``."""
    def get(p, dotted):
        for part in dotted.split("."):
            p = p.get(part) if isinstance(p, Mapping) else None
        return p
    idle = tuple(f"train.{x}." for x in ARMS if not a["train"][x]["lambdas"] and not b["train"][x]["lambdas"])
    keys = [k for k in differing_keys(a, b) if k not in _RUN_SET and not k.startswith(idle)]
    return "; ".join(f"{k} {get(a, k)} → {get(b, k)}" for k in keys)


def _main_side(main: Params, other: Params, name: str) -> list[Design]:
    """Links 1–3: the main design narrowed to what the other design also ran."""
    out, cur = [], main
    drop = [a for a in ARMS if main["train"][a]["lambdas"] and not other["train"][a]["lambdas"]]
    if drop or (any(main["train"]["sweep"].values()) and not any(other["train"]["sweep"].values())):
        cur = _with(cur, {**{f"train.{a}.lambdas": [] for a in drop}, "train.sweep.lr": [],
                          "train.sweep.warmup_steps": []})
        out.append(Design(f"{name}, AdamW only" if not _rules_left(cur) else f"{name}, shared rules", cur, main,
                          "update rules", "left out: " + ", ".join(drop or ["the sweep arms"])))
    keep = [x for x in _lams(cur) if any(_same_budget(cur, x, other, y) for y in _lams(other))]
    if not keep:
        raise ValueError(f"{other['data']['name']}: no λ with the λ·η·T of any of {name}'s ({_lam_text(cur, _lams(cur))})"
                         ": no chain of one factor at a time between them")
    if keep != _lams(cur):
        gone = [x for x in _lams(cur) if x not in keep]
        cur = _with(cur, {"train.lambdas": keep})
        out.append(Design(f"{name}, matched λ", cur, main, "λ grid",
                          f"left out λ {_lam_text(main, gone)} (no λ of the other design has its λ·η·T)"))
    seeds = [s for s in cur["train"]["seeds"] if s in other["train"]["seeds"]]
    if not seeds:
        raise ValueError(f"{other['data']['name']}: no runs in common with {name} (seeds "
                         f"{list(other['train']['seeds'])} against {list(cur['train']['seeds'])}): no chain of one "
                         "factor at a time between them")
    if seeds != list(cur["train"]["seeds"]):
        cur = _with(cur, {"train.seeds": seeds})
        out.append(Design(f"{name}, shared seeds", cur, main, "seeds", f"seeds {', '.join(map(str, seeds))}"))
    return out


def _rules_left(p: Mapping) -> list[str]:
    """The update rules beside AdamW a parameter set still runs."""
    return [a for a in ARMS if p["train"][a]["lambdas"]]


def _other_side(cur: Params, other: Params, name: str) -> list[Design]:
    """Links 4–7: the other design's runs at ``cur``'s budgets and seeds (and only the update rules
    ``cur`` runs), then its seeds, each further λ, and its further update rules."""
    pairs = [(x, next(y for y in _lams(other) if _same_budget(cur, x, other, y))) for x in _lams(cur)]
    seeds = list(cur["train"]["seeds"])  # the main side kept only λ and seeds the other design has
    extra = [a for a in ARMS if other["train"][a]["lambdas"] and not cur["train"][a]["lambdas"]]
    start = _with(other, {"train.lambdas": [y for _, y in pairs], "train.seeds": seeds,
                          **{f"train.{a}.lambdas": [] for a in extra}})
    lam_change = "; ".join(f"λ {x:g} → {y:g} (λ·η·T {_budget(cur, x):.2g} → {_budget(start, y):.2g})"
                           for x, y in pairs if x != y)
    lands = [list(p["landscape"]["lambdas"]) for p in (cur, start)]
    land = f"landscape λ {lands[0]} → {lands[1]}" if lands[0] != lands[1] else ""
    lam_names = ", ".join(f"{y:g}" for _, y in pairs)
    out = [Design(f"{name}, λ {lam_names}, seeds {', '.join(map(str, seeds))}", start, other, "training",
                  "; ".join(x for x in (_changed(cur, start), lam_change, land) if x))]
    if list(other["train"]["seeds"]) != seeds:
        out.append(Design(f"{name}, λ {lam_names}, all seeds", _with(start, {"train.seeds": list(other["train"]["seeds"])}),
                          other, "seeds", f"seeds {', '.join(map(str, seeds))} → "
                                          f"{', '.join(map(str, other['train']['seeds']))}"))
    have = [y for _, y in pairs]
    for lam in sorted(x for x in _lams(other) if x not in have):
        have.append(lam)
        out.append(Design(f"{name}, + λ {lam:g}", _with(out[-1].params, {"train.lambdas": [
            x for x in _lams(other) if x in have]}), other, "λ", f"λ {lam:g} added (λ·η·T {_budget(other, lam):.2g})"))
    if extra:
        out.append(Design(f"{name}, + {', '.join(extra)}", other, other, "update rules", f"added: {', '.join(extra)}"))
    return out


def chain(main: Params, other: Params) -> list[Design]:
    """The designs from ``main`` to ``other``, one factor per link (module docstring); a one-line
    error when they share no seed or a λ of one has no budget in the other."""
    out = [Design(main["data"]["name"], main, main)]
    out += _main_side(main, other, main["data"]["name"])
    return out + _other_side(out[-1].params, other, other["data"]["name"])


def _treatments(ctx: Context) -> dict:
    """What λ did in the design: at the λ matched to the paper's 10⁻² and at the largest λ, each
    against λ = 0 (:func:`villani.claims.reporting.power.treatment`, with the budget λ·η·T)."""
    lams = _lams(ctx.params)
    at = {"paper 1e-2": match(ctx.params, "strong").ours, "largest λ": max(lams) if lams else None}
    out = {}
    for key, lam in at.items():
        if lam is None or lam == 0 or (key == "largest λ" and lam == at["paper 1e-2"]):
            continue
        t = dict(power.treatment(ctx.m, "adamw", [lam]))
        out[key] = {"lam": lam, "budget": _budget(ctx.params, lam), **t} if t else {"lam": lam}
    return out


def _grid(ctx: Context) -> str:
    """Whether every λ of the design has the same learned seeds and measured steps (its AdamW runs):
    empty when it does, else which λ differ."""
    m = ctx.m[(ctx.m["variant"] == "adamw") & ctx.m["run_learned"]]
    cells = {float(lam): (frozenset(g["seed"]), frozenset(g["step"])) for lam, g in m.groupby("lam")}
    want = {x: cells.get(x) for x in _lams(ctx.params)}
    first = next(iter(want.values()), None)
    odd = [f"λ {x:g}" for x, c in want.items() if c != first]
    return "" if not odd else f"not one grid: {', '.join(odd)} differ from λ {_lams(ctx.params)[0]:g} in learned " \
                              "seeds or measured steps"


def design_doc(d: Design, root) -> dict:
    """A design's ledger, summarised: its grid, its treatments, and per row the verdict, the
    interval and the λ the row used."""
    ctx = DesignContext(d, root)
    doc = ledger(d.params, root, ctx=ctx)
    t = d.params["train"]
    rows = {r["id"]: {k: r.get(k) for k in ("class", "verdict", "estimate", "ci_low", "ci_high", "lams",
                                           "seeds_to_decide", "measured_on")}
            for r in doc["claims"]}
    measured = [r for r in doc["claims"] if r["class"] == MEASURED]
    return {"name": d.name, "factor": d.factor, "change": d.change, "dataset": d.params["data"]["name"],
            "lambdas": _lams(d.params), "budgets": [_budget(d.params, x) for x in _lams(d.params)],
            "seeds": list(t.seeds), "steps": t.steps, "variants": ["adamw", *_rules_left(d.params)],
            "treatment": _treatments(ctx), "grid": _grid(ctx),
            "measured": {v: sum(r["verdict"] == v for r in measured) for v in ("supported", "refuted",
                                                                               "inconclusive")},
            "rows": rows}


def same_data(a: Mapping, b: Mapping, root) -> bool:
    """Whether two datasets' tokenizer and token splits are the same files (sha256)."""
    def files(p):
        ds = p["data"]["name"]
        return [layout.fmt(layout.TOKENIZER, root, dataset=ds)] + [
            layout.fmt(layout.SPLIT, root, dataset=ds, split=s) for s in ("train", "validation", "test")]
    pa, pb = files(a), files(b)
    if not all(f.exists() for f in pa + pb):
        missing = next(f for f in pa + pb if not f.exists())
        raise ValueError(f"{missing}: token data not found; run `villani tokenize` for its dataset")
    return all(sha256_file(x) == sha256_file(y) for x, y in zip(pa, pb))


def chain_doc(main: Params, other: Params, root, *, main_name: str = "", other_name: str = "") -> dict:
    """Every design of :func:`chain` with its ledger summary (:func:`design_doc`), the parameter
    files' names and whether the two corpora are the same token files."""
    return {"main": main_name or main["data"]["name"], "other": other_name or other["data"]["name"],
            "same_data": same_data(main, other, root),
            "designs": [design_doc(d, root) for d in chain(main, other)]}


def flips(a: Mapping, b: Mapping) -> list[str]:
    """Ids of the rows of both designs whose verdicts differ."""
    return [i for i, r in a["rows"].items() if i in b["rows"] and r["verdict"] != b["rows"][i]["verdict"]]


def attribution(doc: Mapping) -> dict[str, list[tuple[int, str, str]]]:
    """Per row whose verdict differs anywhere along the chain: (link index, verdict before, after)
    at every link where it changed — the link's factor is the cause."""
    out: dict[str, list[tuple[int, str, str]]] = {}
    ds = doc["designs"]
    for k in range(1, len(ds)):
        for i in flips(ds[k - 1], ds[k]):
            out.setdefault(i, []).append((k, ds[k - 1]["rows"][i]["verdict"], ds[k]["rows"][i]["verdict"]))
    return out
