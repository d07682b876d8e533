rule bounds:
    input:
        measurements=targets.measurements(P),
        stats=targets.data_files(P)["stats"],
    output:
        table=targets.pattern(layout.BOUNDS_DIR) + "/bounds.csv",
        summary=targets.pattern(layout.BOUNDS_DIR) + "/bounds.json",
    params:
        digest=digest("bounds"),
    log:
        LOGS + "/bounds/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("bounds", attempt),
    threads: 1
    shell:
        "villani bounds --threads {threads} {PARAMS} > {log} 2>&1"
