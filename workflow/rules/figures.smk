rule figures:
    input:
        segments=lambda wc: targets.segments(DP[wc.dataset]),
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        extra=lambda wc: targets.figure_inputs(DP[wc.dataset]),
    output:
        report_outputs(),
    log:
        "results/logs/figures/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("figures", attempt),
    params:
        files=PARAMS,
        digest=digest("figures"),
    shell:
        "villani figures --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
