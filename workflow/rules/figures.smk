from villani.figures import CAPTIONS, figure_outputs


def report_outputs():
    """Every figure and table file, wrapped for `snakemake --report` with its caption."""
    files = figure_outputs(P, targets.ROOT)
    return [report(f, caption=CAPTIONS[n], category=c) for n, c, f in files]


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
        extra=lambda wc: targets.figure_inputs(P),
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
