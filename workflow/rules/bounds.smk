rule bounds:
    input:
        measurements=targets.measurements(P),
        stats=targets.data_files(P)["stats"],
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
        digest=digest("bounds"),
    shell:
        # {PARAMS} is formatted in here, not a params: entry (see common.smk)
        f"villani bounds --threads {{threads}} {PARAMS} > {{log}} 2>&1"
