# villani: train GPT-Neo across weight decay λ, measure curvature at every checkpoint,
# evaluate the paper's bounds and render its figures, for one dataset or several
# (`datasets:`, e.g. configs/paper.yaml). Parameters: params.yaml (documented in
# src/villani/schemas/params.schema.yaml). Logic lives in src/villani.
from snakemake.utils import min_version

from villani.report.description import write_description

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/stages.smk"


# The report's description: what this run did, written from its parameters (P, from
# common.smk) by villani.report.description; each figure's caption is package data.
report: write_description(P, workflow.configfiles, workflow.overwrite_configfiles)


# One results tree for Snakemake and DVC (villani.dag.dvc_sync): while this run lasts it
# is registered in DVC's rwlock as the writer of results/, so `dvc repro` refuses instead
# of deleting outputs under it (and this run refuses to start under a running DVC stage);
# a successful run of params.yaml is then recorded in dvc.lock.
onstart:
    claim_results()


onsuccess:
    release_results(success=True)


onerror:
    release_results(success=False)


rule all:
    default_target: True
    input:
        targets.all_outputs(P),
