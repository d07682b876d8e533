rule bounds:
    input:
        measurements=lambda wc: targets.measurements(DP[wc.dataset]),
        stats=lambda wc: targets.data_files(DP[wc.dataset])["stats"],
    output:
        table=f"{targets.pattern(layout.BOUNDS_DIR)}/bounds.csv",
        summary=f"{targets.pattern(layout.BOUNDS_DIR)}/bounds.json",
    log:
        "results/logs/bounds/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("bounds", attempt),
    params:
        files=PARAMS,
        digest=digest("bounds"),
    shell:
        "villani bounds --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
