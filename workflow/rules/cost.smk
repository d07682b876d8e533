rule cost:
    input:
        stats=lambda wc: targets.data_files(DP[wc.dataset])["stats"],
    output:
        targets.pattern(layout.COST_CSV),
    log:
        "results/logs/cost/{dataset}.log",
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
        "villani cost --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
