"""Which ``villani`` command writes a result file — what every message that finds a file
missing, damaged or stale tells the user to run, complete, so that the line runs as printed
and brings the file back (``tests/hardening/test_suggested_commands.py`` runs each one).

A path under a results root is matched against the :mod:`villani.plan.layout` patterns the
stage table (:data:`villani.plan.stages.TABLE`) names as a stage's outputs — and, for
``train``, the checkpoint files it writes beside its manifests, for ``pretrained`` the model
files beside its record. The match gives the stage and the file's wildcards, and they the
command's options, as the workflow's own job for that file has them:

=========================================================  ===============================================
file                                                       command
=========================================================  ===============================================
a run's segment manifest or step log (segment end *e*)     ``villani train … --until e``
a checkpoint's file (step *t*)                             ``villani train … --until <end of t's segment>``
                                                           (``--all`` where the parameters are not at hand:
                                                           every segment that is not intact)
a measurement (step *t*)                                   ``villani measure … --step t``
a landscape surface (λ)                                    ``villani landscape … --lam λ``
a cross-dataset figure or table                            ``villani paper``
any other declared output of a dataset                     ``villani <stage> --dataset <name>``
=========================================================  ===============================================

``--params``: the parameter files of the command that is running (:func:`use_params`, set
once by the CLI; left out when that is ``params.yaml`` alone, or unknown); ``--results``:
the file's results root, left out when it is ``results``. The thread count and every other
setting a job's bytes depend on come from the parameters (``train.threads``), so the line
reproduces what the workflow wrote.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from villani.plan import layout as L
from villani.plan.schedule import segment_for
from villani.plan.stages import TABLE

__all__ = ["use_params", "writer", "command", "how_to_rewrite"]

_PARAMS: tuple[str, ...] = ()
_DEFAULT_PARAMS = ("params.yaml",)

# files a stage writes beside its declared outputs (its versioned folders): a checkpoint's
# files, the named model's files
_BESIDE = {"train": (L.CKPT_DIR + "/{file}",), "pretrained": (L.PRETRAINED_DIR + "/{file}",)}
_WILDCARD = {"root": r".+", "dataset": rf"(?:{L.ACROSS}/)?[^/]+", "variant": r"[^/]+", "lam": r"[^/]+",
             "seed": r"\d+", "step": r"\d{7}", "split": r"[^/]+", "figure": r"[^/]+", "plot": r"[^/]+",
             "file": r"[^/]+"}


def use_params(files: Sequence[str] | None) -> None:
    """The parameter files of the command this process runs (the CLI sets them once)."""
    global _PARAMS
    _PARAMS = tuple(str(f) for f in files or ())


@lru_cache(maxsize=None)
def _patterns() -> tuple[tuple[str, re.Pattern], ...]:
    """(stage, compiled pattern) of every file a stage writes, most specific first."""
    out = []
    for row in TABLE:
        for pattern in (*row.outputs, *_BESIDE.get(row.name, ())):
            regex = re.escape(pattern)
            for name, rx in _WILDCARD.items():
                regex = regex.replace(re.escape("{" + name + "}"), f"(?P<{name}>{rx})", 1)
            out.append((len(re.sub(r"\{\w+\}", "", pattern)), row.name, re.compile(regex + r"\Z")))
    # the longest literal text first: claims/{dataset}_findings.csv before claims/{dataset}.csv
    return tuple((name, regex) for _, name, regex in sorted(out, key=lambda t: -t[0]))


def writer(path: str | Path) -> tuple[str, dict] | None:
    """(stage, wildcards) of the stage that writes ``path``, or None for a path no stage
    writes. The cross-dataset figures and tables (dataset ``paper/…``) are the ``paper``
    stage's."""
    text = Path(path).as_posix()
    for name, regex in _patterns():
        m = regex.match(text)
        if m:
            wc = {k: v for k, v in m.groupdict().items() if v is not None}
            if wc.get("dataset", "").startswith(L.ACROSS + "/"):
                return ("paper", wc) if name == "figures" else None
            return name, wc
    return None


def _run_options(name: str, wc: Mapping, params: Mapping | None) -> list[str]:
    opts = ["--variant", wc["variant"], "--lam", wc["lam"], "--seed", wc["seed"]]
    step = int(wc["step"])
    if name == "measure":
        return opts + ["--step", str(step)]
    if "file" not in wc:  # a segment manifest or step log: its step is the segment's end
        return opts + ["--until", str(step)]
    if params is not None:
        return opts + ["--until", str(segment_for(params["train"], step))]
    return opts + ["--all"]


def command(path: str | Path, params: Mapping | None = None) -> str | None:
    """The ``villani`` command line that writes ``path`` (module doc), or None for a file no
    stage writes. ``params``: the dataset's parameters, where at hand (a checkpoint's
    segment end comes from them)."""
    found = writer(path)
    if found is None:
        return None
    name, wc = found
    argv = ["villani", name]
    for f in _PARAMS if _PARAMS != _DEFAULT_PARAMS else ():
        argv += ["--params", f]
    if wc["root"] != L.RESULTS:
        argv += ["--results", wc["root"]]
    if name != "paper":
        argv += ["--dataset", wc["dataset"]]
    if "variant" in wc and "step" in wc:
        argv += _run_options(name, wc, params)
    elif name == "landscape":
        argv += ["--lam", wc["lam"]]
    return shlex.join(argv)


def how_to_rewrite(path: str | Path, params: Mapping | None = None, *, missing: bool = False) -> str:
    """The end of a message about ``path``: ``run `<command>``` — ``(or the workflow)`` too
    for a ``missing`` file, which the workflow makes again (a damaged or edited one it
    cannot tell from a good one)."""
    cmd = command(path, params)
    if cmd is None:
        return "rerun the workflow to write it" if missing else "write it again"
    return f"run `{cmd}`" + (" (or the workflow)" if missing else "")
