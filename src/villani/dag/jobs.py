"""What every job of the Snakefile is given: its ``--params`` arguments.

Jobs re-read the parameters from the same files Snakemake loaded: ``params.yaml`` first,
then each ``--configfile`` in order (Snakemake's own precedence). Values given with
``--config key=value`` are written once to ``results/.config-overrides/<sha>.yaml`` (a
content-addressed name, so an unchanged override never looks new) and passed last.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Mapping

from villani.io import atomic

def params_files(workflow) -> list[str]:
    cli = [str(f) for f in workflow.overwrite_configfiles or []]
    base = [str(f) for f in workflow.configfiles if str(f) not in cli]
    return base + cli


def workflow_params(workflow, config: Mapping) -> tuple[dict, str]:
    """(resolved parameters, the files they come from) of a Snakemake workflow: its
    parameter files in Snakemake's order (:func:`params_files`: params.yaml, then each
    ``--configfile``, later over earlier) and the ``--config`` values over them
    (:func:`villani.plan.config.resolve_workflow`). ``workflow.configfiles`` lists the
    command line's files *before* the Snakefile's, and ``overwrite_config`` holds the
    ``--configfile`` documents too: neither says which value wins."""
    from villani.plan.config import resolve_workflow

    files = params_files(workflow)
    overrides = getattr(workflow.config_settings, "config", None) or {}
    return resolve_workflow(config, files, overrides), ", ".join(files) or "config"


def overrides_file(overrides: Mapping, root: str = "results") -> str | None:
    if not overrides:
        return None
    blob = json.dumps(overrides, sort_keys=True, default=str)
    path = Path(root) / ".config-overrides" / (hashlib.sha256(blob.encode()).hexdigest()[:16] + ".yaml")
    if not path.exists():
        atomic.write_text(path, blob + "\n")  # JSON is valid YAML
    return str(path)


class ParamsArgs:
    """``--params FILE …`` of a job, as a rule's ``params.files``: formatted into the shell
    line (``{params.files}``), but not compared between runs — Snakemake's params trigger
    compares only plain values (str, numbers, containers) and leaves other objects out.
    Which files hold the parameters is no reason to rerun a job; what they say is, and the
    rule's ``digest`` param tracks that, key by key."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"ParamsArgs({self.text!r})"


def params_args(workflow) -> ParamsArgs:
    """``--params FILE …`` for a job's shell line: the workflow's parameter files in
    Snakemake's order, then the ``--config`` overrides (quoted)."""
    files = params_files(workflow)
    extra = overrides_file(getattr(workflow.config_settings, "config", None) or {})
    if extra:
        files.append(extra)
    return ParamsArgs(" ".join(f"--params {shlex.quote(f)}" for f in files))
