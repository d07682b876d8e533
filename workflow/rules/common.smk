# Parameters, validation and shared helpers. Everything computed here comes from
# functions in src/villani (plan.config, plan.layout, dag.targets, dag.jobs) that the
# tests exercise directly.
from villani.dag import targets
from villani.dag.jobs import params_args, runtime_minutes
from villani.figures import CAPTIONS, CLAIMS_CAPTION, figure_outputs
from villani.plan import layout
from villani.plan.config import ParamsError, resolve
from villani.plan.digest import stage_digest

try:
    P = resolve(config, source=", ".join(map(str, workflow.configfiles)) or "config")
except ParamsError as e:
    raise WorkflowError(str(e)) from None

PARAMS = params_args(workflow)
DATASET = P["data"]["name"]
METRICS = str(layout.fmt(layout.METRICS, targets.ROOT))
LOGS = targets.ROOT + "/logs"


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
    """Every figure and table file, wrapped for `snakemake --report` with its caption."""
    files = figure_outputs(P, targets.ROOT)
    return [report(f, caption=CAPTIONS[n], category=c) for n, c, f in files]
