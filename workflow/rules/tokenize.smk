rule tokenize:
    input:
        fetch=targets.pattern(layout.FETCH_RECORD),
    output:
        train=targets.pattern(layout.SPLIT).replace("{split}", "train"),
        validation=targets.pattern(layout.SPLIT).replace("{split}", "validation"),
        test=targets.pattern(layout.SPLIT).replace("{split}", "test"),
        tokenizer=targets.pattern(layout.TOKENIZER),
        stats=targets.pattern(layout.DATA_STATS),
    log:
        "results/logs/tokenize/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("tokenize", attempt),
    params:
        files=PARAMS,
        digest=digest("tokenize"),
    shell:
        "villani tokenize --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
