# Parameters, validation and shared helpers. Everything computed here comes from
# functions in src/villani (plan.config, plan.stages, dag.rules, dag.targets, dag.jobs)
# that the tests exercise directly; nothing here imports torch, transformers or
# matplotlib (tests/workflow/test_light_parse.py). A document may name several datasets (`datasets:`); every
# per-dataset rule has the wildcard {dataset} and reads DP[dataset], that dataset's
# parameters (villani.plan.config.dataset_params).
import os
import sys

from villani.dag import dvc_sync, failed_jobs, rules, targets
from villani.dag.workspace_state import LockInvalid
from villani.dag.jobs import params_args, workflow_params
from villani.dag.summary import summary
from villani.figures import CAPTIONS, CLAIMS_CAPTION, figure_outputs
from villani.figures.paper import CAPTIONS as PAPER_CAPTIONS
from villani.figures.paper import paper_outputs
from villani.plan import layout
from villani.plan.config import (
    ParamsError,
    dataset_names,
    dataset_params,
)
from villani.plan.digest import datasets_digest, stage_digest
from villani.plan.stages import STAGES, stage

try:
    P, SOURCE = workflow_params(workflow, config)
    targets.check_job_split(P, source=SOURCE)
except ParamsError as e:
    raise WorkflowError(str(e)) from None

# `--params FILE …` of every job: each rule's params.files (see ParamsArgs)
PARAMS = params_args(workflow)
DATASETS = dataset_names(P)
DP = {ds: dataset_params(P, ds) for ds in DATASETS}
# the slot of the cross-dataset outputs: paper/<datasets joined by +>
ACROSS = layout.across(DATASETS)


wildcard_constraints:
    dataset=targets.wildcard_regex(DATASETS),
    variant=targets.wildcard_regex(
        sorted({v for p in DP.values() for v in targets.variant_values(p)})
    ),
    lam=targets.wildcard_regex(
        sorted({x for p in DP.values() for x in targets.lam_values(p)})
    ),
    seed=r"\d+",
    step=r"\d{7}",


def digest(stage):
    """A rule param that changes exactly when a parameter the job reads changes."""
    return lambda wc: stage_digest(DP[wc.dataset], stage, wc.get("variant", "adamw"))


def rule_inputs(row):
    """The files a job of the row reads (villani.dag.rules.inputs)."""
    if row.per == "datasets":
        return rules.every_dataset_inputs(P, row.name)
    return lambda wc: rules.inputs(DP[wc.dataset], row.name, wc)


def rule_outputs(row):
    """The row's outputs; the figures, tables and the claims ledger as report entries. Each
    flagged `update`: kept while its job runs and restored when the job fails
    (villani.dag.failed_jobs)."""
    if row.name == "figures":
        out = report_outputs()
    elif row.name == "paper":
        out = report_paper_outputs()
    else:
        out = rules.outputs(P, row.name)
    if row.name == "claims":
        where = dict(category="Claims", subcategory="{dataset}")
        out[0] = report(out[0], caption=CLAIMS_CAPTION, **where)
    return [update(f) for f in out]


def rule_resources(row):
    """runtime, mem_mb and gpu from the row (villani.dag.rules.resources)."""
    return rules.resources(row, lambda dataset: DP[dataset])


def rule_params(row):
    """The digest of what the job reads; a train / measure job's step (None: every one)."""
    if row.per == "datasets":
        return {"digest": datasets_digest(list(DP.values()), row.name)}
    if row.per == "run":
        return {"digest": digest(row.name), "step": lambda wc: targets.job_step(wc)}
    return {"digest": digest(row.name)}


def report_entries(files, captions, **where):
    """`snakemake --report` shows one entry per figure (its PNG; its first format when PNG
    is not among figures.formats) and per table, with its caption; a figure's other
    formats and its CSV lie beside it, linked from the report's description
    (src/villani/report/workflow.rst)."""
    shown = {}
    for name, _, f in files:
        if name not in shown or (
            f.endswith(".png") and not shown[name].endswith(".png")
        ):
            shown[name] = f
    entry = lambda n, c, f: report(f, caption=captions[n], category=c, **where)
    return [entry(n, c, f) if shown[n] == f else f for n, c, f in files]


def report_outputs():
    """Every figure and table file of a dataset (wildcard {dataset})."""
    files = figure_outputs(P, targets.ROOT, dataset="{dataset}")
    return report_entries(files, CAPTIONS, subcategory="{dataset}")


def report_paper_outputs():
    """The cross-dataset figures and tables."""
    return report_entries(paper_outputs(P, targets.ROOT), PAPER_CAPTIONS)


CLAIMS = []


def claim_results():
    """onstart: register this run as the writer of results/ in DVC's rwlock."""
    if workflow.is_main_process:  # not in the jobs this run spawns
        try:
            CLAIMS.append(dvc_sync.claim(root=targets.ROOT))
        except dvc_sync.TreeBusy as e:
            raise WorkflowError(str(e)) from None


def sync_with_dvc():
    """At the parse of a run (or dry run) of params.yaml: if the workspace is not the one
    both engines last agreed on and DVC vouches for it, record it in Snakemake's metadata
    first; a dvc.lock DVC cannot read stops here (dvc_sync.sync). Not for --lint,
    --list-rules, --report, --unlock, --touch … (dvc_sync.builds_jobs)."""
    overrides = getattr(workflow.config_settings, "config", None)
    if (
        dvc_sync.builds_jobs(sys.argv)
        and workflow.is_main_process
        and dvc_sync.is_committed_params(workflow.configfiles, overrides)
    ):
        try:
            line = dvc_sync.sync(workflow.main_snakefile)
        except LockInvalid as e:
            raise WorkflowError(str(e)) from None
        if line:
            logger.info(line)


def release_results(success):
    """onsuccess/onerror: drop the claim; after a failed run mark the failed jobs' kept
    outputs incomplete (villani.dag.failed_jobs); after a successful run of params.yaml alone,
    record the outputs in dvc.lock; then say where the results are and what the claims
    ledger found (villani.dag.summary)."""
    while CLAIMS:
        dvc_sync.release(CLAIMS.pop())
    kept = None if success else failed_jobs.mark_incomplete(workflow)
    if kept:
        logger.info(kept)
    overrides = getattr(workflow.config_settings, "config", None)
    if not success or os.environ.get(dvc_sync.SYNCING):
        return
    if dvc_sync.is_committed_params(workflow.configfiles, overrides):
        logger.info(dvc_sync.record())
    else:
        logger.info(
            "dvc.lock not updated: dvc.yaml reads params.yaml alone, this run more"
        )
    logger.info("\n".join(summary(P, targets.ROOT)))


sync_with_dvc()
