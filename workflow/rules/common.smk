# Parameters, validation and shared helpers. Everything computed here comes from
# functions in src/villani (plan.config, plan.layout, dag.targets, dag.jobs) that the
# tests exercise directly.
from villani.dag import dvc_sync, targets
from villani.dag.jobs import params_args, runtime_minutes
from villani.figures import CAPTIONS, CLAIMS_CAPTION, figure_outputs
from villani.figures.dvc_plots import plot_outputs
from villani.plan import layout
from villani.plan.config import ParamsError, check_files, resolve
from villani.plan.digest import stage_digest

try:
    check_files(workflow.configfiles)
    P = resolve(config, source=", ".join(map(str, workflow.configfiles)) or "config")
except ParamsError as e:
    raise WorkflowError(str(e)) from None

# `--params FILE …` of every job: each rule's params.files (see ParamsArgs)
PARAMS = params_args(workflow)
DATASET = P["data"]["name"]
METRICS = str(layout.fmt(layout.METRICS, targets.ROOT))


wildcard_constraints:
    dataset=targets.wildcard_regex([DATASET]),
    variant=targets.wildcard_regex(targets.variant_values(P)),
    lam=targets.wildcard_regex(targets.lam_values(P)),
    seed=r"\d+",
    step=r"\d{7}",


def digest(stage):
    """A rule param that changes exactly when a parameter the job reads changes."""
    return lambda wc: stage_digest(P, stage, wc.get("variant", "adamw"))


def report_outputs():
    """Every figure and table file. `snakemake --report` shows one entry per figure (its
    PNG; its first format when PNG is not among figures.formats) and per table, with its
    caption; a figure's other formats and its CSV lie beside it, linked from the report's
    description (src/villani/report/workflow.rst)."""
    files = figure_outputs(P, targets.ROOT)
    shown = {}
    for name, _, f in files:
        if name not in shown or (
            f.endswith(".png") and not shown[name].endswith(".png")
        ):
            shown[name] = f
    entry = lambda n, c, f: report(f, caption=CAPTIONS[n], category=c)
    return [entry(n, c, f) if shown[n] == f else f for n, c, f in files]


CLAIMS = []


def claim_results():
    """onstart: register this run as the writer of results/ in DVC's rwlock."""
    if workflow.is_main_process:  # not in the jobs this run spawns
        try:
            CLAIMS.append(dvc_sync.claim(root=targets.ROOT))
        except dvc_sync.TreeBusy as e:
            raise WorkflowError(str(e)) from None


def release_results(success):
    """onsuccess/onerror: drop the claim; after a successful run of params.yaml alone,
    record the outputs in dvc.lock."""
    while CLAIMS:
        dvc_sync.release(CLAIMS.pop())
    overrides = getattr(workflow.config_settings, "config", None)
    if not success:
        return
    if dvc_sync.is_committed_params(workflow.configfiles, overrides):
        logger.info(dvc_sync.record())
    else:
        logger.info(
            "dvc.lock not updated: dvc.yaml reads params.yaml alone, this run more"
        )
