"""What the ``villani`` command line accepts, checked before any work.

- :class:`Parser`: ``argparse`` whose errors are one line, ``villani: error: --threads:
  -1 is invalid (an integer ≥ 1 and ≤ 4,096) (see `villani --help`)``, exit status 2
  (argparse's own prints the usage first);
- typed options (:func:`integer`, :func:`real`, :func:`device_name`): every count, seed,
  λ and device is checked while parsing, the message names the option;
- :func:`check_device`: a device that names hardware this torch cannot reach (``--device
  cuda`` on a machine without CUDA) is one line with what torch reports, before any data
  is read or model built;
- :func:`common_options`, :func:`run_options`: the options every command takes, and those
  naming one training run; :func:`train_options`, :func:`measure_options`,
  :func:`surface_options`: a stage's own (its row's ``options``, :mod:`villani.plan.stages`).
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Callable

__all__ = ["Parser", "UsageError", "integer", "real", "device_name", "check_device", "common_options", "run_options",
           "train_options", "measure_options", "surface_options", "MAX_PROBES", "MAX_COUNT"]

# the parameter file's bound on measure.num_probes (villani/schemas/params.schema.yaml; the CLI
# does not parse the schema at start-up, a test holds the three equal: diagnose_data's too)
MAX_PROBES = 100_000
# any other count of blocks, steps or eigenvalues
MAX_COUNT = 1_000_000


class UsageError(ValueError):
    """A command line argparse refused: one line naming the option."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one :class:`UsageError` naming the option (the
    CLI prints it as one line, exit status 2; argparse's own prints a usage block first)."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        first = (message.splitlines() or ["bad arguments"])[0]
        first = first[len("argument "):] if first.startswith("argument ") else first
        raise UsageError(f"{first} (see `{self.prog} --help`)")


def integer(least: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [least, most]; argparse adds the option's name."""
    allowed = f"an integer ≥ {least:,}" + (f" and ≤ {most:,}" if most is not None else "")

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer ({allowed})") from None
        if value < least or (most is not None and value > most):
            raise argparse.ArgumentTypeError(f"{value} is invalid ({allowed})")
        return value

    parse.__name__ = "integer"
    return parse


def real(least: float = 0.0, *, strict: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number ≥ least (> least with ``strict``)."""
    allowed = f"a finite number {'>' if strict else '≥'} {least:g}"

    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number ({allowed})") from None
        if not math.isfinite(value) or value < least or (strict and value == least):
            raise argparse.ArgumentTypeError(f"{text} is invalid ({allowed})")
        return value

    parse.__name__ = "number"
    return parse


_DEVICE = re.compile(r"(cpu|cuda|mps|xpu)(:\d+)?\Z")


def device_name(text: str) -> str:
    """An argparse type: ``cpu``, ``cuda``, ``cuda:N``, ``mps`` or ``xpu``[``:N``]."""
    if not _DEVICE.match(str(text).strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device (allowed: cpu, cuda, cuda:N, mps)")
    return str(text).strip()


def check_device(device: str | None) -> None:
    """One-line ValueError unless torch here can use ``device`` (None: torch picks)."""
    if device is None or device == "cpu":
        return
    import torch

    kind, _, index = device.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch was built without CUDA" if torch.version.cuda is None
                   else f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA {torch.version.cuda}, "
                        f"{torch.cuda.device_count()} devices visible)")
            raise ValueError(f"--device: {device!r} asked for, but {why}; use --device cpu or run on a GPU node")
        if index and int(index) >= torch.cuda.device_count():
            raise ValueError(f"--device: {device!r}: only {torch.cuda.device_count()} CUDA devices are visible")
    elif kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError(f"--device: {device!r} asked for, but torch.backends.mps.is_available() is False")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise ValueError(f"--device: {device!r} asked for, but torch.xpu.is_available() is False")


def common_options(top: bool, *, params: bool = True) -> argparse.ArgumentParser:
    """The options every command takes, accepted before and after the command name.

    The top-level parser holds the defaults; a subcommand's copy has none (SUPPRESS), so
    ``villani --params a.yaml validate`` keeps ``a.yaml``. ``--params`` given in both places
    is merged in order (global files first); any other option given after the command wins.
    Without ``params``: no ``--params``/``--dataset`` (a command that reads no parameter file).
    """
    dflt = (lambda v: v) if top else (lambda v: argparse.SUPPRESS)
    p = Parser(add_help=False)
    if params:
        p.add_argument("--params", action="append", metavar="FILE", dest="params" if top else "sub_params",
                       default=dflt(None), help="parameter file(s), merged in order (default: params.yaml)")
    p.add_argument("--results", default=dflt("results"), metavar="DIR", help="results folder (default: results)")
    if params:
        p.add_argument("--dataset", default=dflt(None), metavar="NAME",
                       help="the dataset of a document naming several (datasets:); default: its only one")
    p.add_argument("--device", type=device_name, default=dflt(None),
                   help="torch device: cpu, cuda, cuda:N (default: cuda if available, else cpu)")
    p.add_argument("--threads", type=integer(1, 4096), default=dflt(None), metavar="N",
                   help="CPU threads for torch (default: torch's choice); `villani train` on the CPU uses "
                        "train.threads instead (the count is part of the weights' arithmetic)")
    p.add_argument("--traceback", action="store_true", default=dflt(False), help="show full tracebacks on errors")
    p.add_argument("--log-level", default=dflt(None), metavar="LEVEL",  # checked by configure_logging
                   help="DEBUG, INFO, WARNING or ERROR (default: $VILLANI_LOG_LEVEL, else INFO)")
    p.add_argument("--progress-interval", default=dflt(None), metavar="SECONDS",  # checked by configure_logging
                   help="at most this many seconds between progress lines of a job "
                        "(default: $VILLANI_PROGRESS_INTERVAL, else 60)")
    return p


def run_options(p: argparse.ArgumentParser, several_seeds: bool = False) -> None:
    """``--variant``, ``--lam``, ``--seed``: one training run of the parameters (or, with
    ``several_seeds``, the runs of several seeds)."""
    p.add_argument("--variant", default="adamw",
                   help="run variant: adamw, adamw_lr<η>, adamw_wu<steps>, adamw_noise, adam_l2, langevin")
    p.add_argument("--lam", type=real(0.0), required=True, help="weight decay λ of the run")
    if several_seeds:
        p.add_argument("--seed", type=integer(0), required=True, nargs="+", metavar="SEED",
                       help="seed of the run; several: their runs side by side (--per-device)")
    else:
        p.add_argument("--seed", type=integer(0), required=True, help="seed of the run")


def train_options(p: argparse.ArgumentParser) -> None:
    """``villani train``: the run (or its seeds side by side), and ``--until`` a segment end or ``--all``."""
    run_options(p, several_seeds=True)
    p.add_argument("--per-device", type=integer(1, 64), default=1, metavar="K",
                   help="with several seeds: train K of their runs at a time, one process each, on the device")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--until", type=integer(1), help="segment end step (must be a segment end)")
    g.add_argument("--all", action="store_true", help="run every segment that is not complete yet")


def measure_options(p: argparse.ArgumentParser) -> None:
    """``villani measure``: the run, and ``--step`` a checkpoint or ``--all``."""
    run_options(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--step", type=integer(0), help="checkpoint step")
    g.add_argument("--all", action="store_true", help="every checkpoint of the run")


def surface_options(p: argparse.ArgumentParser) -> None:
    """``villani landscape``: the λ of its surface."""
    p.add_argument("--lam", type=real(0.0), required=True, help="λ of F on the surface")
