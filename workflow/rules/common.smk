# Parameters, validation and shared helpers. Everything computed here comes from
# functions in src/villani (plan.config, plan.layout, dag.targets, dag.jobs) that the
# tests exercise directly. A document may name several datasets (`datasets:`); every
# per-dataset rule has the wildcard {dataset} and reads DP[dataset], that dataset's
# parameters (villani.plan.config.dataset_params).
from villani.dag import targets
from villani.dag.jobs import params_args, runtime_minutes
from villani.figures import CAPTIONS, figure_outputs
from villani.figures.paper import CAPTIONS as PAPER_CAPTIONS
from villani.figures.paper import paper_outputs
from villani.plan import layout
from villani.plan.config import ParamsError, dataset_names, dataset_params, resolve
from villani.plan.digest import datasets_digest, stage_digest

try:
    P = resolve(config, source=", ".join(map(str, workflow.configfiles)) or "config")
except ParamsError as e:
    raise WorkflowError(str(e)) from None

PARAMS = params_args(workflow)
DATASETS = dataset_names(P)
DP = {ds: dataset_params(P, ds) for ds in DATASETS}
LOGS = targets.ROOT + "/logs"


wildcard_constraints:
    dataset=targets.wildcard_regex(DATASETS),
    variant="adamw|noise",
    lam=targets.wildcard_regex(sorted({x for p in DP.values() for x in targets.lam_values(p)})),
    seed=r"\d+",
    step=r"\d{7}",


def digest(stage):
    """A rule param that changes exactly when a parameter the job reads changes."""
    return lambda wc: stage_digest(DP[wc.dataset], stage, wc.get("variant", "adamw"))


def report_outputs():
    """Every figure and table file of a dataset (wildcard {dataset}), wrapped for
    `snakemake --report` with its caption."""
    files = figure_outputs(P, targets.ROOT, dataset="{dataset}")
    return [report(f, caption=CAPTIONS[n], category=c, subcategory="{dataset}") for n, c, f in files]


def report_paper_outputs():
    """The cross-dataset figures and tables, wrapped for `snakemake --report`."""
    return [report(f, caption=PAPER_CAPTIONS[n], category=c) for n, c, f in paper_outputs(P, targets.ROOT)]
