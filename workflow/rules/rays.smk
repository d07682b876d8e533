rule rays:
    input:
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")
        ],
        checkpoint=lambda wc: targets.rays_checkpoint(DP[wc.dataset]),
    output:
        samples=f"{targets.pattern(layout.RAYS_DIR)}/rays.csv",
        fits=f"{targets.pattern(layout.RAYS_DIR)}/slopes.json",
    log:
        "results/logs/rays/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("rays", attempt),
    params:
        files=PARAMS,
        digest=digest("rays"),
    shell:
        "villani rays --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
