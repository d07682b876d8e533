# The cross-dataset figures and tables: drawn from every dataset of the parameters, written
# to results/figures/paper/<datasets>/ and results/tables/paper/<datasets>/ (ACROSS).
rule paper:
    input:
        targets.paper_inputs(P),
    output:
        report_paper_outputs(),
    log:
        f"results/logs/{ACROSS}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("paper", attempt),
    params:
        files=PARAMS,
        digest=datasets_digest(list(DP.values()), "paper"),
    shell:
        "villani paper --threads {threads} {params.files} > {log} 2>&1"
