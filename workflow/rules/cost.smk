rule cost:
    input:
        stats=targets.data_files(P)["stats"],
    output:
        targets.cost_output(),
    log:
        "results/logs/cost.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("cost", attempt),
    params:
        files=PARAMS,
        digest=digest("cost"),
    shell:
        "villani cost --threads {threads} {params.files} > {log} 2>&1"
