# One measure job per checkpoint, or per run with jobs.measure: run (villani.dag.targets:
# every checkpoint of the run in one process, after its last segment). Same rule name, so
# the profiles' resources apply to either.
if not targets.measure_per_run(P):

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

else:

    rule measure:
        input:
            segments=lambda wc: targets.run_segments(DP[wc.dataset], wc),
            data=lambda wc: [
                targets.data_files(DP[wc.dataset])[s]
                for s in ("train", "validation", "stats")
            ],
        output:
            json=targets.run_measure_outputs(P, layout.MEASURE_JSON),
            samples=targets.run_measure_outputs(P, layout.MEASURE_PARQUET),
        log:
            "results/logs/measure/{dataset}/{variant}/lam{lam}/seed{seed}/all.log",
        conda:
            # with --sdm conda; otherwise the environment Snakemake runs in
            "../envs/villani.yaml"
        threads: 1
        resources:
            runtime=lambda wc, attempt: job_runtime(
                "measure_run", DP[wc.dataset], None, attempt
            ),
            mem_mb=lambda wc, attempt: job_mem_mb(
                "measure_run", DP[wc.dataset], None, attempt
            ),
        params:
            files=PARAMS,
            digest=digest("measure"),
        shell:
            "villani measure --threads {threads} {params.files} --dataset {wildcards.dataset} --variant {wildcards.variant} "
            "--lam {wildcards.lam} --seed {wildcards.seed} --all > {log} 2>&1"
