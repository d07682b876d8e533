"""A Snakemake rule from a stage's row (:data:`villani.plan.stages.TABLE`): its inputs,
outputs, log, shell command and resources. ``workflow/rules/stages.smk`` defines one rule per
row by calling these; nothing here imports Snakemake, so each is unit-tested.

The row's patterns are expanded as :mod:`villani.plan.stages` says (a run's wildcards are
the job's run or every run; ``{step}`` the job's step or every step of its kind), with the
job's wildcards (``{dataset}``, ``{variant}``, ``{lam}``, ``{seed}``, ``{step}``) left for
Snakemake in the outputs.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from villani.dag import targets
from villani.dag.resources import MEM_CAP_MB, job_mem_mb, job_runtime
from villani.dag.targets import ROOT, job_log, job_outputs, job_step, pattern, per_run, run_files
from villani.plan import layout
from villani.plan.runs import Run, landscape_runs, rays_center, runs
from villani.plan.stages import Stage, stage


def _centres(params: Mapping, row: Stage, wc) -> list[Run]:
    """The runs a stage is centred on: the landscape's every seed at its λ, the rays' one run."""
    return landscape_runs(params, float(wc["lam"])) if row.per == "lam" else [rays_center(params)[0]]


def _expand(params: Mapping, row: Stage, file: str, wc) -> list[str]:
    """The files of one input pattern of ``row`` for the job with wildcards ``wc``."""
    ds = params["data"]["name"]
    if "{centre_lam}" in file:
        return [f for run in _centres(params, row, wc) for f in run_files(params, run, layout.SEGMENT, None)]
    if "{variant}" in file:
        if row.per == "run":
            return run_files(params, targets.job_run(params, wc), file, job_step(wc))
        return [f for r in runs(params) for f in run_files(params, r, file, None)]
    if "{lam}" in file:  # a landscape surface
        lams = [wc["lam"]] if row.per == "lam" else params["landscape"]["lambdas"]
        return [str(layout.fmt(file, ROOT, dataset=ds, lam=lam)) for lam in lams]
    return [str(layout.fmt(file, ROOT, dataset=ds))]


def inputs(params: Mapping, name: str, wc) -> list[str]:
    """The files a job of stage ``name`` reads (``wc``: its wildcards; ``params``: its
    dataset's); a training job per segment also reads the segment it continues."""
    row = stage(name)
    files = [f for file in row.inputs for f in _expand(params, row, file, wc)]
    if name == "train":
        files += targets.train_inputs(params, wc)
    return list(dict.fromkeys(files))


def every_dataset_inputs(doc: Mapping, name: str) -> list[str]:
    """The inputs of a stage over every dataset (``per: datasets``, the ``paper`` stage)."""
    return [f for p in targets.per_dataset(doc) for f in inputs(p, name, {})]


def outputs(doc: Mapping, name: str) -> list[str]:
    """The output patterns of stage ``name``'s rule (wildcards kept; a job per run names
    each step's files, :func:`~villani.dag.targets.job_outputs`). The figure and plot
    files are :func:`figure_files` and :func:`villani.tracking.dvc_plots.plot_outputs`."""
    row = stage(name)
    out = []
    for file in row.outputs:
        if "{step}" in file:
            out += job_outputs(doc, name, file)
        elif "{plot}" in file:
            from villani.tracking.dvc_plots import plot_outputs

            out += plot_outputs(ROOT)
        elif "{figure}" not in file:
            out.append(pattern(file))
    return out


def log(doc: Mapping, name: str, slot: str = "{dataset}") -> str:
    """The job's log: per run ``results/logs/<stage>/…/seed<s>/<segment or checkpoint or all>.log``,
    else ``results/logs/<stage>/<dataset>[/lam<λ>].log`` (``slot``: the dataset folder)."""
    row = stage(name)
    if row.per == "run":
        return job_log(doc, name)
    return f"{ROOT}/logs/{name}/{slot}" + ("/lam{lam}" if row.per == "lam" else "") + ".log"


def command(doc: Mapping, name: str) -> str:
    """The job's shell line: ``villani <stage>`` with the job's parameter files, ``--dataset``
    and the row's ``command`` — its wildcards the job's; ``{step}`` the job's segment end or
    checkpoint (``params.step``), ``--all`` for a job per run (``jobs.<rule>: run``); a train
    job of seeds side by side: ``--seed s1 s2 … --per-device k``. A job per segment or
    checkpoint keeps the line it always had, so Snakemake's code trigger reruns nothing an
    earlier version wrote; a stage that ``stops`` on SIGTERM is exec-ed, so the signal
    (SLURM's, through the job-side Snakemake and a shell) reaches the process that saves its
    work state and no shell dies first and takes the job step with it (docs/slurm.md)."""
    row = stage(name)
    args = re.sub(r"\{(\w+)\}", lambda m: "{params.step}" if m[1] == "step" else f"{{wildcards.{m[1]}}}", row.command)
    if row.per == "run" and per_run(doc, name):
        args = re.sub(r"--[\w-]+ \{params\.step\}", "--all", args)
    if name == "train" and (k := targets.side_by_side(doc)) >= 2:
        seeds = " ".join(map(str, targets.job_seeds(doc)))
        args = args.replace("--seed {wildcards.seed}", f"--seed {seeds} --per-device {k}")
    threads = " --threads {threads}" if row.inputs else ""  # a stage that reads no result computes nothing
    dataset = "" if row.per == "datasets" else " --dataset {wildcards.dataset}"
    return (f"{'exec ' if row.stops else ''}villani {name}{threads} {{params.files}}{dataset}"
            f"{' ' + args if args else ''} > {{log}} 2>&1")


def resources(row: Stage, params_of: Callable[[str], Mapping]) -> dict:
    """The rule's resources, from its row (``params_of``: a dataset's parameters by name):
    ``runtime`` (minutes) and ``mem_mb``, the row's × attempt (at most :data:`MEM_CAP_MB`) or
    from the job's work (the row's ``estimate``, :mod:`villani.dag.resources`); ``gres: gpu:1``
    for a GPU stage — the SLURM executor asks ``--gres=gpu:1 --cpus-per-gpu=<threads>`` (a
    site's typed GRES, ``gpu:a100:1``, replaces it through a profile's ``set-resources``)."""
    if row.estimate:
        work = lambda f: lambda wc, attempt: f(row.name, params_of(wc.dataset), job_step(wc), attempt)
        out = {"runtime": work(job_runtime), "mem_mb": work(job_mem_mb)}
    else:
        out = {"runtime": lambda wc, attempt: row.runtime * attempt,
               "mem_mb": lambda wc, attempt: min(row.mem_mb * attempt, MEM_CAP_MB)}
    return {**out, "gres": "gpu:1"} if row.gpu else out


def local_rules() -> list[str]:
    """The stages that run on the submit host."""
    from villani.plan.stages import TABLE

    return [s.name for s in TABLE if s.local]
