"""How many SLURM submissions (``sbatch`` calls) a parameter document makes through a profile.

Snakemake submits every job on its own, except the submit-host rules (the rows of
:data:`villani.plan.stages.TABLE` marked ``local``: ``fetch``, ``pretrained``, ``plan``; and
``all``, which runs nothing) and the jobs of a group: the
profile's ``groups:`` give rules a group, jobs of one group connected in the DAG are one
submission, and ``group-components: <group>=N`` puts N such connected pieces into one. In
``profiles/slurm``: group ``train`` — a run's segments are one chain, so one submission per
run; group ``measure`` — measure jobs are not connected to each other, so one submission
per N of them. Hence

    submissions = Σ_ungrouped rules jobs + Σ_groups ⌈pieces / N⌉.

:func:`job_counts` counts the jobs from the plan (what ``snakemake -n`` lists under "Job
stats"; ``tests/slurm/test_submissions.py`` checks the two agree), :func:`dry_run_count`
counts the submissions in a ``snakemake -n`` listing, and ``python -m
villani.dag.submissions [PRESET ...]`` prints the table of ``docs/slurm.md``, "Submissions: group jobs".
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Mapping

from villani.plan.stages import TABLE

LOCAL_RULES = frozenset({s.name for s in TABLE if s.local} | {"all"})
PROFILE = Path("profiles/slurm/config.yaml")  # of the checkout one runs in


def job_counts(doc: Mapping) -> Counter:
    """Jobs per rule of a resolved parameter document (every dataset), as ``snakemake -n``."""
    from villani.dag import targets
    from villani.plan.config import dataset_names, dataset_params

    counts: Counter = Counter({"all": 1})
    counts.update({s.name: 1 for s in TABLE if s.per == "datasets"})
    for name in dataset_names(doc):
        p = dataset_params(doc, name)
        n_runs = len(list(targets.runs(p)))  # jobs.train / jobs.measure: one job per run, or per segment / checkpoint
        trained = _side_by_side_runs(p)  # what a train job covers: a run, or the seeds of one (update rule, λ)
        per_job = {"train": len(targets.segments(p)) * trained // n_runs, "measure": len(targets.measurements(p))}
        whole = {"train": trained, "measure": n_runs}
        for s in TABLE:
            if s.per == "":
                counts[s.name] += 1
            elif s.per == "lam":
                counts[s.name] += len(p["landscape"]["lambdas"])
            elif s.per == "run":
                counts[s.name] += whole[s.name] if targets.per_run(doc, s.name) else per_job[s.name]
    return +counts


def _side_by_side_runs(p: Mapping) -> int:
    """The train jobs' units of one dataset's parameters: its runs, or with seeds side by side
    (:func:`villani.dag.targets.side_by_side` ≥ 2) its (update rule, λ) pairs."""
    from villani.dag import targets

    runs = list(targets.runs(p))
    return len({(r.variant, r.lam) for r in runs}) if targets.side_by_side(p) >= 2 else len(runs)


def connected_pieces(doc: Mapping) -> dict[str, int]:
    """Connected pieces of each rule's jobs: a run's segments chain (one piece per run, or per
    (update rule, λ) with its seeds side by side; with ``jobs.train: run`` one job); a measure
    job (of a checkpoint or, with ``jobs.measure: run``, of a run) is a piece of its own."""
    from villani.plan.config import dataset_names, dataset_params

    return {"train": sum(_side_by_side_runs(dataset_params(doc, name)) for name in dataset_names(doc)),
            "measure": job_counts(doc)["measure"]}


def profile_grouping(profile: Path | str = PROFILE) -> tuple[dict[str, str], dict[str, int]]:
    """(rule → group, group → components) from a profile's ``groups`` and ``group-components``."""
    from villani.plan.config import read_yaml

    cfg = read_yaml(Path(profile))
    pairs = lambda key: dict(item.split("=", 1) for item in cfg.get(key) or [])  # noqa: E731
    return pairs("groups"), {g: int(n) for g, n in pairs("group-components").items()}


def submissions(doc: Mapping, profile: Path | str = PROFILE) -> dict[str, int]:
    """Submissions per rule (a group's under its first rule's name) and ``total``."""
    groups, components = profile_grouping(profile)
    counts, pieces = job_counts(doc), connected_pieces(doc)
    out = {r: n for r, n in counts.items() if r not in LOCAL_RULES and r not in groups}
    for group in sorted(set(groups.values())):
        rules = [r for r, g in groups.items() if g == group]
        if len(rules) != 1 or rules[0] not in pieces:
            raise ValueError(f"{profile}: group {group!r} ({rules}): counted only for a group of train or of measure")
        out[rules[0]] = math.ceil(pieces[rules[0]] / components.get(group, 1))
    out["total"] = sum(out.values())
    return out


def dry_run_stats(listing: str) -> dict[str, int]:
    """Jobs per rule from the "Job stats" table of ``snakemake -n``."""
    m = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+\d+", listing, re.S)
    if not m:
        raise ValueError("no 'Job stats' table in the listing")
    return {name: int(n) for name, n in (line.split() for line in m.group(1).splitlines())}


def dry_run_count(listing: str, grouped_rules) -> int:
    """Submissions in the output of ``snakemake -n`` with a SLURM profile: its group jobs
    plus the jobs of ungrouped rules run off the submit host."""
    stats = dry_run_stats(listing)
    ungrouped = sum(n for r, n in stats.items() if r not in LOCAL_RULES and r not in set(grouped_rules))
    return ungrouped + len(re.findall(r"^\S.*\] Group job ", listing, re.M))


def table(presets: list[str], profile: Path | str = PROFILE) -> str:
    """The Markdown table of ``docs/slurm.md``: jobs and submissions per preset."""
    from villani.plan.config import load_params

    rows = ["| preset | jobs | submissions | train (one per chain of segments) | measure (bundles) | other |", "|---|---|---|---|---|---|"]
    for preset in presets:
        doc = load_params([preset])
        s = submissions(doc, profile)
        other = s["total"] - s["train"] - s["measure"]
        rows.append(f"| `{preset}` | {sum(job_counts(doc).values()):,} | **{s['total']:,}** | {s['train']} | "
                    f"{s['measure']} | {other} |")
    return "\n".join(rows)


if __name__ == "__main__":  # pragma: no cover
    print(table(sys.argv[1:] or ["configs/ptb.yaml", "configs/wikitext103.yaml", "configs/paper.yaml"]))
