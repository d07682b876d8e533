rule train:
    input:
        data=lambda wc: [targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")],
        pretrained=lambda wc: targets.pretrained_files(DP[wc.dataset]),
        previous=lambda wc: targets.previous_segment(DP[wc.dataset], wc),
    output:
        manifest=targets.pattern(layout.SEGMENT),
        log_csv=targets.pattern(layout.SEGMENT_LOG),
    params:
        digest=digest("train"),
        step=lambda wc: int(wc.step),
    log:
        LOGS + "/train/{dataset}/{variant}/lam{lam}/seed{seed}/seg{step}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("train", attempt),
    threads: 1
    shell:
        "villani train --threads {threads} {PARAMS} --dataset {wildcards.dataset} --variant {wildcards.variant} "
        "--lam {wildcards.lam} --seed {wildcards.seed} --until {params.step} > {log} 2>&1"
