rule metrics:
    input:
        segments=lambda wc: targets.segments(DP[wc.dataset]),
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        bounds=lambda wc: targets.bounds_outputs(DP[wc.dataset]),
        claims=lambda wc: targets.claims_outputs(DP[wc.dataset]),
    output:
        metrics=targets.pattern(layout.METRICS),
        plots=plot_outputs(targets.ROOT),
    log:
        "results/logs/metrics/{dataset}.log",
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
        "villani metrics --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
