# A job per training segment, or per run with jobs.train: run (`villani train --all`, the
# run's segments in sequence in one process): outputs, log, inputs and the command's step
# option come from villani.dag.targets.
rule train:
    input:
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")
        ],
        pretrained=lambda wc: targets.pretrained_files(DP[wc.dataset]),
        previous=lambda wc: targets.train_inputs(DP[wc.dataset], wc),
    output:
        manifest=targets.job_outputs(P, "train", layout.SEGMENT),
        log_csv=targets.job_outputs(P, "train", layout.SEGMENT_LOG),
    log:
        targets.job_log(P, "train"),
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: job_runtime(
            "train", DP[wc.dataset], targets.job_step(wc), attempt
        ),
        mem_mb=lambda wc, attempt: job_mem_mb(
            "train", DP[wc.dataset], targets.job_step(wc), attempt
        ),
    params:
        files=PARAMS,
        digest=digest("train"),
        step=lambda wc: targets.job_step(wc),
    shell:
        targets.job_command(P, "train")
