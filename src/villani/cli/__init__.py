"""The ``villani`` command line: one subcommand per workflow stage.

Every Snakemake rule and DVC stage runs exactly one of these. Parameters come from one or
more YAML files (``--params``, later files override earlier ones; default ``params.yaml``),
validated before anything runs. A document that names several datasets (``datasets:``)
needs ``--dataset NAME`` for the commands of one dataset's stage; ``fetch``, ``validate``,
``prune`` and ``convert-checkpoints`` default to every dataset, ``paper`` reads them all.
Errors the user can fix (bad parameters, a corrupt or missing file, a diverged run, a full
disk) print one line ``villani: error: …`` and exit with status 2; ``--traceback`` (or
``VILLANI_TRACEBACK=1``) shows the full trace.
Logging is configured here, once (:func:`villani.runtime.progress.configure_logging`): long
stages write timestamped progress lines to stderr at least every ``--progress-interval``
seconds, so a job log shows how far a job is while it runs.

Here: the parser, the table from command name to command (:data:`COMMANDS`), the checks
before any work and the error policy. A stage's command — its help, options, work and
whether it checks ``--device`` — is its row of :data:`villani.plan.stages.TABLE`; the
commands are :mod:`villani.cli.commands` (``diagnose``: :mod:`villani.cli.diagnose`), the
options :mod:`villani.cli.options`.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys

from villani.cli import commands
from villani.cli.diagnose import add_parser as add_diagnose_parser, cmd_diagnose
from villani.cli.options import Parser, UsageError, check_device, common_options
from villani.plan.stages import TABLE, Stage, function


def build_parser() -> argparse.ArgumentParser:
    from villani import __version__

    common = common_options(top=False)
    parser = Parser(prog="villani", description=__doc__.split("\n\n")[0].replace("``", ""),
                    parents=[common_options(top=True)])
    parser.add_argument("--version", action="version", version=f"villani {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    v = sub.add_parser("validate", parents=[common], help="validate parameter files; print the runs, segments and checkpoints they define")
    v.add_argument("--print", action="store_true", help="print the complete parameters with defaults")

    _stage_parsers(sub, common)
    cr = sub.add_parser("claims-report", parents=[common], help="docs/results.md, docs/paper-errors.md and the "
                        "README's verdict table from ledgers (printed, or --write FILE … between each file's markers)")
    cr.add_argument("--ledger", metavar="JSON", help="the ledger to report (default: results/claims/<dataset>.json "
                    "of --params)")
    cr.add_argument("--sensitivity", metavar="FILE", action="append", default=[],
                    help="another design's parameter file (e.g. configs/strong.yaml, its results under --results): "
                    "the chain of designs to it, one factor at a time, and its ledger; repeatable")
    cr.add_argument("--write", metavar="FILE", nargs="+", default=[], help="in each FILE, replace the text between "
                    "every pair of claims-report, paper-wrong and claims-verdicts markers it has")
    pf = sub.add_parser("profile", parents=[common], help="install profiles/slurm where `snakemake --profile NAME` "
                        "finds it (~/.config/snakemake/NAME), never over an existing profile")
    pf.add_argument("action", choices=["install"], help="what to do")
    pf.add_argument("--name", default="slurm", help="profile name (default: slurm; taken → slurm-villani, …)")
    pf.add_argument("--source", default="profiles/slurm", metavar="DIR", help="profile folder (default: profiles/slurm)")
    pf.add_argument("--account", help="sbatch -A for every rule (fills the USER: slurm_account line)")
    pf.add_argument("--partition", help="sbatch -p for every rule (fills the USER: slurm_partition line)")
    pf.add_argument("--gpu-partition", help="sbatch -p for the GPU rules (" + ", ".join(r.name for r in TABLE if r.gpu)
                    + "): a set-resources entry each, from the stage table")
    add_diagnose_parser(sub, common_options(top=False, params=False))
    _run_lock_parser(sub, common)
    pr = sub.add_parser("prune", parents=[common], help="delete weights of measured checkpoints no stage still needs")
    pr.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    sub.add_parser("convert-checkpoints", parents=[common], help="rewrite checkpoints of the old flat layout "
                   "(ckpt/step<t>.safetensors) as Hugging Face folders ckpt/step<t>/")
    _dvc_yaml_parser(sub, common)
    _docs_parser(sub, common)
    for action in sub._choices_actions:  # `villani COMMAND --help` opens with what COMMAND does
        if sub.choices[action.dest].description is None:
            sub.choices[action.dest].description = action.help
    return parser


# --------------------------------------------------------------------------- villani run-lock
def _run_lock_parser(sub, common) -> None:
    rl = sub.add_parser("run-lock", parents=[common], help="run a Snakemake command holding RESULTS/.villani.lock "
                        "(one run at a time; a killed run's stale Snakemake lock is removed first): "
                        "villani run-lock -- snakemake …")
    rl.add_argument("--brief", action="store_true", help="show the plan, progress, errors and the closing "
                    "summary of Snakemake's output, not each job's inputs and outputs (its log file "
                    ".snakemake/log/ keeps all of it)")
    rl.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")


# --------------------------------------------------------------------------- the stages' commands
def _stage_parsers(sub, common) -> None:
    """``villani <stage>`` for every row of the stage table: its help and its own options
    (the row's ``options``; every stage takes the common ones)."""
    for row in TABLE:
        p = sub.add_parser(row.name, parents=[common], help=row.help)
        if row.options:
            function(row.options)(p)


def _stage_command(row: Stage):
    """What ``villani <stage>`` runs: the row's ``work``, else ``villani.cli.commands.cmd_<name>``,
    imported when the command runs."""
    return lambda args: function(row.work or f"villani.cli.commands:cmd_{row.name}")(args)


# --------------------------------------------------------------------------- villani dvc-yaml
def _dvc_yaml_parser(sub, common) -> None:
    dy = sub.add_parser("dvc-yaml", parents=[common], help="write dvc.yaml from the stage table "
                        "(villani.plan.stages); --check: exit 2 when dvc.yaml is not current or a parameter "
                        "file lacks a key DVC reads")
    dy.add_argument("--check", action="store_true", help="check, write nothing")
    dy.add_argument("--output", default="dvc.yaml", metavar="FILE", help="the file (default: dvc.yaml)")


def _docs_parser(sub, common) -> None:
    dc = sub.add_parser("docs", parents=[common], help="write the documentation site's generated pages (parameters, "
                        "command line, records, claim catalogue) from their sources; --check: exit 2 naming each "
                        "page that is not current")
    dc.add_argument("--check", action="store_true", help="check, write nothing")


COMMANDS = {
    "validate": commands.cmd_validate, **{row.name: _stage_command(row) for row in TABLE},
    "claims-report": commands.cmd_claims_report, "prune": commands.cmd_prune, "convert-checkpoints": commands.cmd_convert_checkpoints, "diagnose": cmd_diagnose,
    "profile": commands.cmd_profile, "run-lock": commands.cmd_run_lock, "dvc-yaml": commands.cmd_dvc_yaml,
    "docs": lambda args: commands.cmd_docs(args, build_parser()),
}


# commands that compute on --device (checked before any work): the stages on a GPU, and diagnose
DEVICE_COMMANDS = {row.name for row in TABLE if row.gpu} | {"diagnose"}
# commands that write nothing under --results
READ_ONLY = {"validate", "profile", "diagnose", "dvc-yaml", "claims-report", "docs"}


def _check_writable(results: str) -> None:
    """Before any work: ``results`` (or the folder it would be created in) must accept a new
    file — a read-only or unwritable results/ is reported now, not after the computation."""
    import tempfile
    from pathlib import Path

    folder = Path(results).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder (--results {results})")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".villani-write-check-"):
            pass
    except OSError as e:
        raise ValueError(f"{folder}: cannot write results there ({e.strerror}); nothing was computed") from None


def _target_of_temp(filename) -> str:
    """The file an atomic write was producing, for a temporary ``.<name>.<hex>.tmp`` beside it."""
    import re
    from pathlib import Path

    m = re.fullmatch(r"\.(.+)\.[0-9a-f]{12}\.tmp", Path(str(filename)).name)
    return str(Path(str(filename)).with_name(m.group(1))) if m else str(filename)


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return (f"{_target_of_temp(e.filename or 'disk')}: no space left on device; earlier results are intact "
                "(writes are atomic)")
    if isinstance(e, OSError) and e.filename:
        return f"{_target_of_temp(e.filename)}: {e.strerror}"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line; ``--params`` before and after the command are merged in order."""
    args = build_parser().parse_args(argv)
    args.params = (args.params or []) + (vars(args).pop("sub_params", None) or []) or None
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit status 0, 2 (an error a user can fix: one line), 130
    (interrupted by Ctrl-C / SIGINT: one line; atomic writes leave no partial output) or 75
    (stopped by SIGTERM / SIGUSR1, :mod:`villani.runtime.stop`: one line; training saved its work
    state at the step it reached, other commands left no partial output)."""
    from villani.runtime import stop

    try:
        with stop.raising():
            return _main(argv)
    except KeyboardInterrupt:  # before the command started (parsing, imports)
        if os.environ.get("VILLANI_TRACEBACK"):
            raise
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except stop.Stopped as e:
        print(f"villani: {e}", file=sys.stderr)
        return stop.EXIT_STOPPED


INTERRUPTED = "villani: interrupted; no partial output was written (earlier results are intact)"


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(argv)
    except UsageError as e:
        print(f"villani: error: {e}", file=sys.stderr)
        return 2
    from villani.plan.config import ParamsError
    from villani.plan.writers import use_params
    from villani.training import TrainingDiverged

    use_params(getattr(args, "params", None))  # the files a message's command names (villani.plan.writers)

    try:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        if args.command in DEVICE_COMMANDS:
            check_device(args.device)
        from villani.runtime.progress import configure_logging

        configure_logging(args.log_level, args.progress_interval)
        if args.command not in READ_ONLY:
            _check_writable(args.results)
        COMMANDS[args.command](args)
    except KeyboardInterrupt:
        if args.traceback or os.environ.get("VILLANI_TRACEBACK"):
            raise
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except (ParamsError, TrainingDiverged, ValueError, OSError) as e:
        if args.traceback or os.environ.get("VILLANI_TRACEBACK"):
            raise
        print(f"villani: error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0
