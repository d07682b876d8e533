"""The files each workflow stage produces and needs — the logic behind the Snakefile.

The Snakefile and its rule files only call these functions, so every input function of
the DAG is unit-testable without Snakemake. Paths are relative to the working directory
(``results/…``); steps and λ are canonicalised by :mod:`villani.plan.layout`.

Every function but :func:`all_outputs`, :func:`paper_inputs` and :func:`paper_outputs`
takes the parameters of one dataset (:func:`villani.plan.config.dataset_params`); those
three take the resolved document and cover every dataset in it.
"""

from __future__ import annotations

from typing import Mapping

from villani.plan import layout
from villani.plan.config import ParamsError, dataset_names, dataset_params
from villani.plan.runs import Run, is_sweep_arm, rays_center, runs, variants
from villani.plan.schedule import (
    job_steps,
    measured_steps,
    segment_ends,
    segment_for,
    segment_start,
)
from villani.plan.stages import stage

ROOT = layout.RESULTS


def pattern(p: str) -> str:
    """A layout pattern with the results root filled and the other wildcards kept."""
    return p.replace("{root}", ROOT)


def fetch_record(params: Mapping) -> str:
    """``results/fetch/{dataset}.json``, written by the fetch rule (a localrule)."""
    return str(layout.fmt(layout.FETCH_RECORD, ROOT, dataset=params["data"]["name"]))


def pretrained_files(params: Mapping) -> list[str]:
    """The declared output of the pretrained stage, ``pretrained.json`` — what every run
    starts from. It is written for every dataset (``name`` null without ``model.name``, as
    the DVC stage writes it), last, with the sha256 of the config and weights saved beside
    it, which every reader verifies; those files are not declared (they exist only for a
    named model)."""
    return [str(layout.fmt(layout.PRETRAINED_META, ROOT, dataset=params["data"]["name"]))]


def data_files(params: Mapping) -> dict[str, str]:
    ds = params["data"]["name"]
    out = {s: str(layout.fmt(layout.SPLIT, ROOT, dataset=ds, split=s)) for s in layout.SPLITS}
    out["tokenizer"] = str(layout.fmt(layout.TOKENIZER, ROOT, dataset=ds))
    out["stats"] = str(layout.fmt(layout.DATA_STATS, ROOT, dataset=ds))
    return out


# files a run writes per segment end; per measured checkpoint: the rest with {step}
_PER_SEGMENT = (layout.SEGMENT, layout.SEGMENT_LOG, layout.CENTRE_SEGMENT, layout.CENTRE_SEEDS_SEGMENT)


def run_files(params: Mapping, run: Run, file: str, step: int | None) -> list[str]:
    """``file`` (a layout pattern) of ``run``: at a job's ``step`` (a segment file: the
    segment certifying it), or with ``step`` None at every step of its kind (segment ends;
    measured checkpoints)."""
    if "{step}" not in file:
        return [str(run.path(file, ROOT))]
    if step is not None:
        step = segment_for(params["train"], step) if file in _PER_SEGMENT else step
        return [str(run.path(file, ROOT, step=step))]
    steps = segment_ends(params["train"]) if file in _PER_SEGMENT else measured_steps(params, run.variant)
    return [str(run.path(file, ROOT, step=s)) for s in steps]


def job_run(params: Mapping, wc) -> Run:
    """The run of a job's wildcards."""
    return Run(params["data"]["name"], wc["variant"], float(wc["lam"]), int(wc["seed"]))


def previous_segment(params: Mapping, wc) -> list[str]:
    """The manifest of the segment a training segment continues from (none for the first)."""
    start = segment_start(params["train"], int(wc["step"]))
    return [] if start == 0 else [str(job_run(params, wc).path(layout.SEGMENT, ROOT, step=start))]


def _certifying_segment(params: Mapping, run: Run, step: int) -> str:
    """The segment manifest that certifies checkpoint ``step`` of ``run`` is complete."""
    return str(run.path(layout.SEGMENT, ROOT, step=segment_for(params["train"], step)))


def segment_of_checkpoint(params: Mapping, wc) -> str:
    """The segment manifest that certifies checkpoint ``wc.step`` is complete."""
    return _certifying_segment(params, job_run(params, wc), int(wc["step"]))


def _run_segments(params: Mapping, run: Run) -> list[str]:
    """The manifest of every training segment of ``run``."""
    return [str(run.path(layout.SEGMENT, ROOT, step=e)) for e in segment_ends(params["train"])]


def segments(params: Mapping, variants_=None) -> list[str]:
    """The last segment manifest of every training segment of every run (of ``variants_``)."""
    return [f for r in runs(params, variants_) for f in _run_segments(params, r)]


def per_run(doc: Mapping, rule: str) -> bool:
    """``jobs.<rule>: run`` (rule ``train`` or ``measure``): one job per run — its segments in
    sequence, or every checkpoint after its last segment — instead of one per segment or
    checkpoint. ``doc``: the resolved document or one dataset's parameters (they share ``jobs``)."""
    return doc["jobs"][rule] == "run"


def side_by_side(doc: Mapping) -> int:
    """The runs a train job trains side by side (``jobs.runs_per_device``, ``auto`` resolved
    per dataset, the least); 1: a train job per run or segment. ``doc``: the document or one
    dataset's parameters."""
    from villani.dag.resources import runs_per_device

    return min(runs_per_device(dataset_params(doc, name)) for name in dataset_names(doc))


def job_seeds(doc: Mapping) -> list[int]:
    """The seeds a train job of seeds side by side trains (every dataset's, :func:`check_job_split`)."""
    return list(dataset_params(doc, dataset_names(doc)[0])["train"]["seeds"])


def check_job_split(doc: Mapping, source: str = "params") -> None:
    """Refuse ``jobs.<rule>: run`` where the datasets of ``doc`` differ in segment ends (train)
    or checkpoint steps (measure), and seeds trained side by side (``jobs.runs_per_device``
    ≥ 2) where they differ in seeds: one rule then names every run's files, steps and seeds
    included. Only the workflow needs this (the Snakefile calls it); every other reader of
    the parameters ignores the job split."""
    for rule, unit in (("train", "segment"), ("measure", "checkpoint")):
        if not per_run(doc, rule):
            continue
        steps = {name: job_steps(rule, dataset_params(doc, name)["train"]) for name in dataset_names(doc)}
        if len({tuple(s) for s in steps.values()}) > 1:
            which = "; ".join(f"{name} {len(s)} up to step {s[-1]}" for name, s in steps.items())
            raise ParamsError(f'{source}: jobs.{rule}: "run" is invalid ({unit}; run only where every dataset has '
                              f"the same {unit} steps, and here they differ — {unit}s: {which})")
    seeds = {name: dataset_params(doc, name)["train"]["seeds"] for name in dataset_names(doc)}
    if side_by_side(doc) >= 2 and len({tuple(s) for s in seeds.values()}) > 1:
        raise ParamsError(f"{source}: jobs.runs_per_device: {doc['jobs']['runs_per_device']!r} is invalid (seeds side "
                          "by side only where every dataset has the same seeds, and here they differ — "
                          + "; ".join(f"{name} {s}" for name, s in seeds.items()) + "); use 1")
    if per_run(doc, "measure"):
        for name in dataset_names(doc):
            p = dataset_params(doc, name)
            if p["measure"]["sweep_arms"] == "ends" and any(is_sweep_arm(v) for v in variants(p)):
                raise ParamsError(f'{source}: jobs.measure: "run" is invalid with measure.sweep_arms: ends and sweep '
                                  f"arms (dataset {name}: one rule would name every checkpoint of a sweep arm; use "
                                  f"jobs.measure: checkpoint, or measure.sweep_arms: every)")


def job_outputs(doc: Mapping, rule: str, file: str) -> list[str]:
    """The outputs of a ``train`` or ``measure`` job for ``file`` (a layout pattern with
    ``{step}``): the pattern itself with a job per segment / checkpoint; with a job per run,
    one file per segment end / checkpoint step, the run's wildcards ({dataset}, {variant},
    {lam}, {seed}) kept — the datasets share those steps (:func:`check_job_split`). A train
    job of seeds side by side (:func:`side_by_side`) names each seed's files."""
    files = [pattern(file)]
    if rule == "train" and side_by_side(doc) >= 2:
        files = [f.replace("{seed}", str(s)) for f in files for s in job_seeds(doc)]
    if not per_run(doc, rule):
        return files
    steps = job_steps(rule, dataset_params(doc, dataset_names(doc)[0])["train"])
    return [f.replace("{step}", layout.format_step(s)) for f in files for s in steps]


def job_log(doc: Mapping, rule: str) -> str:
    """The log of a ``train`` or ``measure`` job: per segment / checkpoint, or ``all.log`` per run."""
    name = "all" if per_run(doc, rule) else ("seg{step}" if rule == "train" else "step{step}")
    seed = "seeds" if rule == "train" and side_by_side(doc) >= 2 else "seed{seed}"
    return f"{ROOT}/logs/{rule}/{{dataset}}/{{variant}}/lam{{lam}}/{seed}/{name}.log"


def job_step(wc) -> int | None:
    """The segment end / checkpoint of a job, or None for a job per run (no ``{step}``)."""
    step = wc.get("step")
    return None if step is None else int(step)


def train_inputs(params: Mapping, wc) -> list[str]:
    """A train job's previous segment (a job per segment, none for the first; of each seed
    side by side); nothing for a job per run."""
    if job_step(wc) is None:
        return []
    if "seed" in wc.keys():
        return previous_segment(params, wc)
    return [f for s in params["train"]["seeds"] for f in previous_segment(params, {**dict(wc.items()), "seed": s})]


def measure_segments(params: Mapping, wc) -> list[str]:
    """The segment manifests a measure job reads: the one certifying its checkpoint, or with a
    job per run every segment of the run."""
    if job_step(wc) is not None:
        return [segment_of_checkpoint(params, wc)]
    return _run_segments(params, job_run(params, wc))


def measurements(params: Mapping) -> list[str]:
    """measure.json of every measured checkpoint of every run, of every variant
    (:func:`~villani.plan.schedule.measured_steps`: every checkpoint, the sweep arms' ends
    only with ``measure.sweep_arms: ends``)."""
    return [str(r.path(layout.MEASURE_JSON, ROOT, step=s)) for r in runs(params)
            for s in measured_steps(params, r.variant)]


def lam_values(params: Mapping) -> list[str]:
    """Every λ text a run, ray or landscape uses (for wildcard constraints)."""
    lams = {r.lam for r in runs(params)} | set(params["landscape"]["lambdas"])
    return sorted({layout.format_lam(x) for x in lams})


def variant_values(params: Mapping) -> list[str]:
    """Every variant name of the params (for wildcard constraints)."""
    return variants(params)


def wildcard_regex(values) -> str:
    import re

    return "|".join(re.escape(str(v)) for v in values)


def rays_checkpoint(params: Mapping) -> list[str]:
    """The segment certifying the checkpoint a ray goes through (rays.through_checkpoint)."""
    return [_certifying_segment(params, *rays_center(params))] if params["rays"]["through_checkpoint"] else []


def _dataset_files(params: Mapping, patterns) -> list[str]:
    return [str(layout.fmt(p, ROOT, dataset=params["data"]["name"])) for p in patterns]


def rays_outputs(params: Mapping) -> list[str]:
    return _dataset_files(params, stage("rays").outputs)


def landscape_outputs(params: Mapping) -> list[str]:
    ds = params["data"]["name"]
    return [str(layout.fmt(f, ROOT, dataset=ds, lam=lam)) for lam in params["landscape"]["lambdas"]
            for f in stage("landscape").outputs]


def bounds_outputs(params: Mapping) -> list[str]:
    return _dataset_files(params, stage("bounds").outputs)


def cost_output(params: Mapping) -> str:
    """The HVP cost sweep of Fig 10 (``villani cost``)."""
    return _dataset_files(params, stage("cost").outputs)[0]


def metrics_outputs(params: Mapping) -> list[str]:
    """Every file of ``villani metrics``: the headline ``results/metrics/{dataset}.json``, the
    table beside it and the DVC plot data — each one a target, so a missing one is made again."""
    return stage_outputs(params, "metrics")


def claims_outputs(params: Mapping) -> list[str]:
    """The claims ledger of the params' dataset (``villani claims``): CSV, JSON, findings CSV."""
    return _dataset_files(params, stage("claims").outputs)


def plan_output(params: Mapping) -> str:
    """``results/plan/{dataset}.json`` (``villani plan``): the runs and surfaces the params define."""
    return _dataset_files(params, stage("plan").outputs)[0]


def figure_inputs(params: Mapping) -> list[str]:
    """What the figures read beyond the runs and measurements."""
    return rays_outputs(params) + landscape_outputs(params) + bounds_outputs(params) + [cost_output(params)]


def per_dataset(doc: Mapping) -> list[dict]:
    """The parameters of every dataset of a resolved document, in its order."""
    return [dataset_params(doc, name) for name in dataset_names(doc)]


def paper_inputs(doc: Mapping) -> list[str]:
    """What the cross-dataset figures and tables read, of every dataset: data stats,
    training segments (logs), measurements and bounds."""
    out = []
    for p in per_dataset(doc):
        out += [data_files(p)["stats"]] + segments(p) + measurements(p) + bounds_outputs(p)
    return out


def paper_outputs(doc: Mapping) -> list[str]:
    """The files of ``villani paper`` (:func:`villani.figures.paper.paper_outputs`)."""
    from villani.figures.paper import paper_outputs as outputs

    return [f for _, _, f in outputs(doc, ROOT)]


def stage_outputs(params: Mapping, name: str) -> list[str]:
    """Every file stage ``name`` declares for one dataset's parameters: its row's outputs
    (:data:`villani.plan.stages.TABLE`) for every run and step, every landscape λ, every
    figure and DVC plot."""
    from villani.figures import figure_outputs
    from villani.plan.stages import stage as row_of
    from villani.tracking.dvc_plots import plot_outputs

    row, ds = row_of(name), params["data"]["name"]
    out = []
    for file in row.outputs:
        if "{figure}" in file:
            out += [f for _, _, f in figure_outputs(params, ROOT)] if file == layout.FIGURE else []
        elif "{plot}" in file:
            out += plot_outputs(ROOT, ds)
        elif row.per == "run":
            out += [f for r in runs(params) for f in run_files(params, r, file, None)]
        elif row.per == "lam":
            out += [str(layout.fmt(file, ROOT, dataset=ds, lam=lam)) for lam in params["landscape"]["lambdas"]]
        else:
            out.append(str(layout.fmt(file, ROOT, dataset=ds)))
    return out


def across_outputs(doc: Mapping, name: str) -> list[str]:
    """Every file stage ``name`` (``per: datasets``) declares for the document: its figures and
    tables (:func:`paper_outputs`), its other files in the cross-dataset folder
    (:func:`villani.plan.layout.across`)."""
    from villani.plan.stages import stage as row_of

    row, slot = row_of(name), layout.across(dataset_names(doc))
    out = paper_outputs(doc) if any("{figure}" in f for f in row.outputs) else []
    return out + [str(layout.fmt(f, ROOT, dataset=slot)) for f in row.outputs if "{figure}" not in f]


def all_outputs(doc: Mapping) -> list[str]:
    """Every declared output of every stage that is a target (its row's ``target``), per
    dataset, then the cross-dataset outputs — the workflow's targets. Each is one: Snakemake
    builds its DAG from the targets and does not rebuild a missing file that only an
    up-to-date job reads (a deleted measurement Parquet beside its JSON), so a file the
    workflow makes is a file it makes again."""
    from villani.plan.stages import TABLE

    rows = [row for row in TABLE if row.target]
    out = [f for p in per_dataset(doc) for row in rows if row.per != "datasets" for f in stage_outputs(p, row.name)]
    return out + [f for row in rows if row.per == "datasets" for f in across_outputs(doc, row.name)]
