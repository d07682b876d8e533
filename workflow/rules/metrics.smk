rule metrics:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        bounds=targets.bounds_outputs(P),
        claims=targets.claims_outputs(),
    output:
        METRICS,
    params:
        digest=digest("metrics"),
    log:
        LOGS + "/metrics.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("metrics", attempt),
    threads: 1
    shell:
        "villani metrics --threads {threads} {PARAMS} > {log} 2>&1"
