# Parameters, validation and shared helpers. Everything computed here comes from
# functions in src/villani (config, layout, targets) that the tests exercise directly.
import json
from pathlib import Path

from villani import layout, targets
from villani.config import ParamsError, resolve, stage_digest
from villani.workflow_support import params_args, runtime_minutes

try:
    P = resolve(config, source=", ".join(map(str, workflow.configfiles)) or "config")
except ParamsError as e:
    raise WorkflowError(str(e)) from None

PARAMS = params_args(workflow, config)
DATASET = P["data"]["name"]
METRICS = str(layout.fmt(layout.METRICS, targets.ROOT))
LOGS = targets.ROOT + "/logs"


wildcard_constraints:
    dataset=targets.wildcard_regex([DATASET]),
    variant="adamw|noise",
    lam=targets.wildcard_regex(targets.lam_values(P)),
    seed=r"\d+",
    step=r"\d{7}",


def digest(stage):
    """A rule param that changes exactly when a parameter the job reads changes."""
    return lambda wc: stage_digest(P, stage, wc.get("variant", "adamw"))
