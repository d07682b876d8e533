rule landscape:
    input:
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")
        ],
        checkpoint=lambda wc: targets.landscape_checkpoint(DP[wc.dataset], wc),
    output:
        surface=f"{targets.pattern(layout.LANDSCAPE_DIR)}/surface.csv",
        meta=f"{targets.pattern(layout.LANDSCAPE_DIR)}/surface.json",
    log:
        "results/logs/landscape/{dataset}/lam{lam}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("landscape", attempt),
    params:
        files=PARAMS,
        digest=digest("landscape"),
    shell:
        "villani landscape --threads {threads} {params.files} --dataset {wildcards.dataset} --lam {wildcards.lam} "
        "> {log} 2>&1"
