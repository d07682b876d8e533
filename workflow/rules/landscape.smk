rule landscape:
    input:
        data=lambda wc: [targets.data_files(P)[s] for s in ("train", "stats")],
        checkpoint=lambda wc: targets.landscape_checkpoint(P, wc),
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
        digest=digest("landscape"),
    shell:
        # {PARAMS} is formatted in here, not a params: entry (see common.smk)
        f"villani landscape --threads {{threads}} {PARAMS} --lam {{wildcards.lam}} > {{log}} 2>&1"
