from villani.cost import cost_digest
from villani.figures import CAPTIONS, figure_outputs


def report_outputs():
    """Every figure and table file, wrapped for `snakemake --report` with its caption."""
    files = figure_outputs(P, targets.ROOT)
    return [report(f, caption=CAPTIONS[n], category=c) for n, c, f in files]


rule hvp_cost:
    input:
        stats=targets.data_files(P)["stats"],
    output:
        targets.cost_output(),
    params:
        digest=lambda wc: cost_digest(P),
    log:
        LOGS + "/cost.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes(P, "hvp_cost", attempt),
    threads: 1
    shell:
        "villani cost --threads {threads} {PARAMS} > {log} 2>&1"


rule figures:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        extra=lambda wc: targets.figure_inputs(P),
    output:
        report_outputs(),
    params:
        digest=lambda wc: stage_digest(P, "figures"),
    log:
        LOGS + "/figures.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes(P, "figures", attempt),
    threads: 1
    shell:
        "villani figures --threads {threads} {PARAMS} > {log} 2>&1"


rule metrics:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        bounds=targets.bounds_outputs(P),
    output:
        METRICS,
    params:
        digest=lambda wc: stage_digest(P, "metrics"),
    log:
        LOGS + "/metrics.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes(P, "metrics", attempt),
    threads: 1
    shell:
        "villani metrics --threads {threads} {PARAMS} > {log} 2>&1"
