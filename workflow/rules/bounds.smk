rule bounds:
    input:
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        stats=lambda wc: targets.data_files(DP[wc.dataset])["stats"],
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
        "villani bounds --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
