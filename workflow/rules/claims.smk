rule claims:
    input:
        segments=lambda wc: targets.segments(DP[wc.dataset]),
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        extra=lambda wc: targets.figure_inputs(DP[wc.dataset]),
    output:
        table=report(
            targets.pattern(layout.CLAIMS_CSV),
            caption=CLAIMS_CAPTION,
            category="Claims",
            subcategory="{dataset}",
        ),
        detail=targets.pattern(layout.CLAIMS_JSON),
        findings=targets.pattern(layout.CLAIMS_FINDINGS_CSV),
    log:
        "results/logs/claims/{dataset}.log",
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
        "villani claims --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
