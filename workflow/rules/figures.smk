rule figures:
    input:
        segments=lambda wc: targets.segments(DP[wc.dataset]),
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        extra=lambda wc: targets.figure_inputs(DP[wc.dataset]),
    output:
        report_outputs(),
    params:
        digest=digest("figures"),
    log:
        LOGS + "/figures/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("figures", attempt),
    threads: 1
    shell:
        "villani figures --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
