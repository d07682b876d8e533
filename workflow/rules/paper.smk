# The cross-dataset figures and tables: drawn from every dataset of the parameters.
rule paper:
    input:
        targets.paper_inputs(P),
    output:
        report_paper_outputs(),
    params:
        digest=datasets_digest(list(DP.values()), "paper"),
    log:
        LOGS + "/" + layout.across(DATASETS) + ".log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("paper", attempt),
    threads: 1
    shell:
        "villani paper --threads {threads} {PARAMS} > {log} 2>&1"
