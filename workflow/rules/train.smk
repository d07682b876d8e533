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
        files=PARAMS,
        digest=digest("train"),
        step=lambda wc: int(wc.step),
    shell:
        "villani train --threads {threads} {params.files} --variant {wildcards.variant} --lam {wildcards.lam} "
        "--seed {wildcards.seed} --until {params.step} > {log} 2>&1"
