rule claims:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        extra=lambda wc: targets.figure_inputs(P),
    output:
        table=report(
            targets.claims_outputs()[0],
            caption=CLAIMS_CAPTION,
            category="Claims",
        ),
        detail=targets.claims_outputs()[1],
    params:
        digest=digest("claims"),
    log:
        LOGS + "/claims.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("claims", attempt),
    threads: 1
    shell:
        "villani claims --threads {threads} {PARAMS} > {log} 2>&1"
