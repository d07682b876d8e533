rule train:
    input:
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")
        ],
        pretrained=lambda wc: targets.pretrained_files(DP[wc.dataset]),
        previous=lambda wc: targets.previous_segment(DP[wc.dataset], wc),
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
        runtime=lambda wc, attempt: job_runtime(
            "train", DP[wc.dataset], int(wc.step), attempt
        ),
        mem_mb=lambda wc, attempt: job_mem_mb(
            "train", DP[wc.dataset], int(wc.step), attempt
        ),
    params:
        files=PARAMS,
        digest=digest("train"),
        step=lambda wc: int(wc.step),
    shell:
        # exec: `villani train` replaces the shell, so a stop signal (SLURM: the job-side
        # Snakemake, a shell, villani) reaches a process that saves its work state, and no
        # shell dies first and takes the job step down with it (docs/slurm.md, "Time limits").
        "exec villani train --threads {threads} {params.files} --dataset {wildcards.dataset} --variant {wildcards.variant} "
        "--lam {wildcards.lam} --seed {wildcards.seed} --until {params.step} > {log} 2>&1"
