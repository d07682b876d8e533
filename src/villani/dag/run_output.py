"""What ``make run`` shows of Snakemake's output: the plan (its job counts), a line per
finished job with the progress, every error with the failed job's log, and the run's
closing lines (the DVC record and the summary of :mod:`villani.dag.summary`).

Snakemake prints each job's input, output, log, reason, wildcards and resources before it
runs it — for the embedded default some 900 lines, most of them input lists — and its own
``--quiet rules`` drops them from its log file too, with the failed jobs' error blocks
(Snakemake 9's log filter maps job info, job errors and shell commands to one quietness,
and the file log goes through the same filter). So Snakemake runs with its full output,
which its log file ``.snakemake/log/<time>.snakemake.log`` keeps whole, and
:class:`BriefOutput` passes on what a person follows at the terminal (``villani run-lock
--brief``, what ``make run`` runs).

Dropped, by the shape Snakemake 9 prints them in: a job's block (``rule <name>:`` or
``localrule``/``checkpoint``, then its indented lines), the ``Shell command:`` line, the
time stamp before each block, the ``SNAKEMAKE`` banner (date, host, versions, paths) and
the scheduler's ``Select jobs to execute...`` / ``Execute N jobs...``, and a blank line
after a dropped or blank one. A ``Finished jobid:
N (Rule: name)`` line becomes part of the progress line after it: ``3 of 38 steps (8%)
done: train``. Everything else passes unchanged — errors included (``Error in rule …:``
and its indented lines are not a job's block).
"""

from __future__ import annotations

import re

__all__ = ["BriefOutput"]

_JOB_BLOCK = re.compile(r"(local)?(rule|checkpoint) [\w.-]+:")
_TIME_STAMP = re.compile(r"\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]")
_SCHEDULER = re.compile(r"Select jobs to execute\.\.\.|Execute \d+ jobs?\.\.\.")
_FINISHED = re.compile(r"Finished jobid: \d+ \(Rule: ([\w.-]+)\)")
_PROGRESS = re.compile(r"\d+ of \d+ steps \([^)]*\) done")


class BriefOutput:
    """Feed Snakemake's output one line at a time (:meth:`line`); each call returns the text
    to show for it, or None."""

    def __init__(self) -> None:
        self._in_job = False  # inside a job's block: its indented lines follow
        self._in_banner = False  # inside the SNAKEMAKE banner, which ends at a blank line
        self._finished: list[str] = []  # rules finished since the last progress line
        self._blank_ok = False  # a blank line is shown only after a shown line that is not blank

    def line(self, text: str) -> str | None:
        """The line to show for Snakemake's line ``text`` (without its newline), or None."""
        shown = self._shown(text)
        if shown is not None and not shown.strip():
            shown = shown if self._blank_ok else None
        self._blank_ok = bool(shown and shown.strip())
        return shown

    def _shown(self, text: str) -> str | None:
        if self._in_job:
            if text.startswith("    "):
                return None
            self._in_job = False
        if self._in_banner:
            self._in_banner = bool(text.strip())
            return None
        if _JOB_BLOCK.fullmatch(text):
            self._in_job = True
            return None
        if text == "SNAKEMAKE":
            self._in_banner = True
            return None
        finished = _FINISHED.fullmatch(text)
        if finished:
            self._finished.append(finished.group(1))
            return None
        if _PROGRESS.fullmatch(text) and self._finished:
            text, self._finished = f"{text}: {', '.join(self._finished)}", []
        if _TIME_STAMP.fullmatch(text) or _SCHEDULER.fullmatch(text) or text.startswith("Shell command: "):
            return None
        return text
