# villani: train GPT-Neo across weight decay λ, measure curvature at every checkpoint,
# evaluate the paper's bounds and render its figures, for one dataset or several
# (`datasets:`, e.g. configs/paper.yaml). Parameters: params.yaml (documented in
# workflow/schemas/params.schema.yaml). Logic lives in src/villani.
from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/tokenize.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/rays.smk"
include: "workflow/rules/landscape.smk"
include: "workflow/rules/bounds.smk"
include: "workflow/rules/cost.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        targets.all_outputs(P),
