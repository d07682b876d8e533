rule claims:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        extra=lambda wc: targets.figure_inputs(P),
    output:
        table=report(
            targets.claims_outputs()[0], caption=CLAIMS_CAPTION, category="Claims"
        ),
        detail=targets.claims_outputs()[1],
    log:
        "results/logs/claims.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("claims", attempt),
    params:
        files=PARAMS,
        digest=digest("claims"),
    shell:
        "villani claims --threads {threads} {params.files} > {log} 2>&1"
