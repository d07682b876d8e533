rule cost:
    input:
        stats=lambda wc: targets.data_files(DP[wc.dataset])["stats"],
    output:
        targets.pattern(layout.COST_CSV),
    params:
        digest=digest("cost"),
    log:
        LOGS + "/cost/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("cost", attempt),
    threads: 1
    shell:
        "villani cost --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
