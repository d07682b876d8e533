"""A failed job leaves the previous good outputs in place, and the next run redoes it.

Snakemake deletes a job's outputs before it runs it and again when it fails ("might be
corrupted"): an edited measure JSON would take ``bounds.{csv,json}`` with it, a truncated
``train.parquet`` the segment manifests that vouch for the checkpoints — which stay, then
unverifiable. Here every declared output is flagged ``update`` (``workflow/rules/
common.smk``): Snakemake then keeps the file while the job runs, backs it up first and
restores the backup when the job fails. Nothing a job writes can be half a file (every
``villani`` write is atomic: temp file + rename), so a file there is either the previous
good output or the new one.

What Snakemake does not do (its issue #3808): after a failed job it records the outputs
as complete, under the job's parameters and inputs — the restored previous outputs would
pass for the new ones. :func:`mark_incomplete` (the ``onerror`` hook) marks the outputs of
every job that failed in this run as incomplete in Snakemake's own metadata, as a job that
was killed mid-way leaves them; the profiles' ``rerun-incomplete`` redoes those jobs on the
next run (``snakemake -n`` lists them), and until then the previous outputs stay readable.

The one use of Snakemake's scheduler and persistence objects (``workflow.scheduler.failed``,
``workflow.persistence.started``), in this function alone.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["mark_incomplete"]


def _jobs(failed: Iterable[Any]) -> list[Any]:
    """The single jobs of the failed jobs (a group job's members)."""
    out = []
    for job in failed:
        out += list(getattr(job, "jobs", None) or [job])
    return out


def mark_incomplete(workflow: Any) -> str | None:
    """Mark the outputs of this run's failed jobs incomplete (module doc); return a line
    naming the jobs whose previous outputs were kept, or None when no job failed."""
    scheduler = getattr(workflow, "scheduler", None)
    jobs = _jobs(getattr(scheduler, "failed", None) or [])
    if not jobs:
        return None
    for job in jobs:
        workflow.persistence.started(job)
    names = sorted({f"{job.rule.name}" + (f" ({', '.join(f'{k}={v}' for k, v in job.wildcards_dict.items())})"
                                          if job.wildcards_dict else "") for job in jobs})
    return (f"kept the previous outputs of {len(jobs)} failed job(s), marked incomplete (the next run redoes them): "
            + "; ".join(names[:5]) + ("; …" if len(names) > 5 else ""))
