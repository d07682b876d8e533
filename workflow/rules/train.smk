rule train:
    input:
        data=lambda wc: [targets.data_files(P)["train"], targets.data_files(P)["stats"]],
        previous=lambda wc: targets.previous_segment(P, wc),
    output:
        manifest=targets.pattern(layout.SEGMENT),
        log_csv=targets.pattern(layout.SEGMENT_LOG),
    log:
        "results/logs/train/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("train", attempt),
    params:
        digest=digest("train"),
        step=lambda wc: int(wc.step),
    shell:
        # {PARAMS} is formatted in here, not a params: entry (see common.smk)
        f"villani train --threads {{threads}} {PARAMS} --variant {{wildcards.variant}} --lam {{wildcards.lam}} "
        "--seed {wildcards.seed} --until {params.step} > {log} 2>&1"
