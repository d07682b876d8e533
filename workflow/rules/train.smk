rule train:
    input:
        data=lambda wc: [targets.data_files(P)["train"], targets.data_files(P)["stats"]],
        previous=lambda wc: targets.previous_segment(P, wc),
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
        "villani train --threads {threads} {PARAMS} --variant {wildcards.variant} --lam {wildcards.lam} "
        "--seed {wildcards.seed} --until {params.step} > {log} 2>&1"
