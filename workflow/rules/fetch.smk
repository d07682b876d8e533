# On the submit host (login node, which has internet): the corpus, tokenizer and model
# into the Hugging Face cache, and the named model's files into results/pretrained/.
# Every later job reads only the cache and results/ (HF_HUB_OFFLINE=1 is safe).
localrules:
    fetch,
    pretrained,


rule fetch:
    output:
        targets.pattern(layout.FETCH_RECORD),
    params:
        digest=digest("fetch"),
    log:
        LOGS + "/fetch/{dataset}.log",
    shell:
        "villani fetch {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"


rule pretrained:
    input:
        targets.pattern(layout.FETCH_RECORD),
    output:
        config=targets.pattern(layout.PRETRAINED_CONFIG),
        record=targets.pattern(layout.PRETRAINED_META),
    params:
        digest=digest("pretrained"),
    log:
        LOGS + "/pretrained/{dataset}.log",
    shell:
        "villani pretrained {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
