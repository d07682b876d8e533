rule metrics:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        bounds=targets.bounds_outputs(P),
    output:
        METRICS,
    log:
        "results/logs/metrics.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("metrics", attempt),
    params:
        digest=digest("metrics"),
    shell:
        # {PARAMS} is formatted in here, not a params: entry (see common.smk)
        f"villani metrics --threads {{threads}} {PARAMS} > {{log}} 2>&1"
