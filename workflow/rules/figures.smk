rule figures:
    input:
        segments=targets.segments(P),
        measurements=targets.measurements(P),
        extra=lambda wc: targets.figure_inputs(P),
    output:
        report_outputs(),
    log:
        "results/logs/figures.log",
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
        "villani figures --threads {threads} {params.files} > {log} 2>&1"
