rule cost:
    input:
        stats=targets.data_files(P)["stats"],
    output:
        targets.cost_output(),
    params:
        digest=digest("cost"),
    log:
        LOGS + "/cost.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("cost", attempt),
    threads: 1
    shell:
        "villani cost --threads {threads} {PARAMS} > {log} 2>&1"
