rule metrics:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        bounds=targets.bounds_outputs(P),
        claims=targets.claims_outputs(),
    output:
        metrics=METRICS,
        plots=plot_outputs(targets.ROOT),
    log:
        "results/logs/metrics.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("metrics", attempt),
    params:
        files=PARAMS,
        digest=digest("metrics"),
    shell:
        "villani metrics --threads {threads} {params.files} > {log} 2>&1"
