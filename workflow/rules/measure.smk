# A job per checkpoint, or per run with jobs.measure: run (`villani measure --all` after the
# run's last segment, every checkpoint in one process): outputs, log, inputs and the
# command's step option come from villani.dag.targets.
rule measure:
    input:
        segments=lambda wc: targets.measure_segments(DP[wc.dataset], wc),
        data=lambda wc: [
            targets.data_files(DP[wc.dataset])[s]
            for s in ("train", "validation", "stats")
        ],
    output:
        json=targets.job_outputs(P, "measure", layout.MEASURE_JSON),
        samples=targets.job_outputs(P, "measure", layout.MEASURE_PARQUET),
    log:
        targets.job_log(P, "measure"),
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: job_runtime(
            "measure", DP[wc.dataset], targets.job_step(wc), attempt
        ),
        mem_mb=lambda wc, attempt: job_mem_mb(
            "measure", DP[wc.dataset], targets.job_step(wc), attempt
        ),
    params:
        files=PARAMS,
        digest=digest("measure"),
        step=lambda wc: targets.job_step(wc),
    shell:
        targets.job_command(P, "measure")
