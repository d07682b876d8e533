rule figures:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        extra=lambda wc: targets.figure_inputs(P),
    output:
        report_outputs(),
    params:
        digest=digest("figures"),
    log:
        LOGS + "/figures.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("figures", attempt),
    threads: 1
    shell:
        "villani figures --threads {threads} {PARAMS} > {log} 2>&1"
