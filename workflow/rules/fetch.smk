# On the submit host (login node, which has internet): the corpus, tokenizer and model
# into the Hugging Face cache, and the named model's files into results/pretrained/
# (pretrained.json for every dataset: name null without model.name, as DVC's stage).
# Every later job reads only the cache and results/ (HF_HUB_OFFLINE=1 is safe).
localrules:
    fetch,
    pretrained,


rule fetch:
    output:
        targets.pattern(layout.FETCH_RECORD),
    log:
        "results/logs/fetch/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("fetch", attempt),
    params:
        files=PARAMS,
        digest=digest("fetch"),
    shell:
        "villani fetch {params.files} --dataset {wildcards.dataset} > {log} 2>&1"


rule pretrained:
    input:
        targets.pattern(layout.FETCH_RECORD),
    output:
        targets.pattern(layout.PRETRAINED_META),
    log:
        "results/logs/pretrained/{dataset}.log",
    conda:
        # with --sdm conda; otherwise the environment Snakemake runs in
        "../envs/villani.yaml"
    threads: 1
    resources:
        runtime=lambda wc, attempt: runtime_minutes("pretrained", attempt),
    params:
        files=PARAMS,
        digest=digest("pretrained"),
    shell:
        "villani pretrained --threads {threads} {params.files} --dataset {wildcards.dataset} > {log} 2>&1"
