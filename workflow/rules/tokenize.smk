rule tokenize:
    input:
        fetch=targets.pattern(layout.FETCH_RECORD),
    output:
        train=targets.pattern(layout.SPLIT).replace("{split}", "train"),
        validation=targets.pattern(layout.SPLIT).replace("{split}", "validation"),
        test=targets.pattern(layout.SPLIT).replace("{split}", "test"),
        tokenizer=targets.pattern(layout.TOKENIZER),
        stats=targets.pattern(layout.DATA_STATS),
    params:
        digest=digest("tokenize"),
    log:
        LOGS + "/tokenize/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("tokenize", attempt),
    threads: 1
    shell:
        "villani tokenize --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
