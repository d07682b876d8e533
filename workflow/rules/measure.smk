rule measure:
    input:
        segment=lambda wc: targets.segment_of_checkpoint(DP[wc.dataset], wc),
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s]
            for s in ("train", "validation", "stats")
        ],
    output:
        json=targets.pattern(layout.MEASURE_JSON),
        samples=targets.pattern(layout.MEASURE_PARQUET),
    log:
        "results/logs/measure/{dataset}/{variant}/lam{lam}/seed{seed}/step{step}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: job_runtime(
            "measure", DP[wc.dataset], int(wc.step), attempt
        ),
        mem_mb=lambda wc, attempt: job_mem_mb(
            "measure", DP[wc.dataset], int(wc.step), attempt
        ),
    params:
        files=PARAMS,
        digest=digest("measure"),
        step=lambda wc: int(wc.step),
    shell:
        "villani measure --threads {threads} {params.files} --dataset {wildcards.dataset} --variant {wildcards.variant} "
        "--lam {wildcards.lam} --seed {wildcards.seed} --step {params.step} > {log} 2>&1"
