rule metrics:
    input:
        segments=lambda wc: targets.segments(DP[wc.dataset]),
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        bounds=lambda wc: targets.bounds_outputs(DP[wc.dataset]),
    output:
        targets.pattern(layout.METRICS),
    params:
        digest=digest("metrics"),
    log:
        LOGS + "/metrics/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("metrics", attempt),
    threads: 1
    shell:
        "villani metrics --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
