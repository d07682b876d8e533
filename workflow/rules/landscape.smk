rule landscape:
    input:
        data=lambda wc: [targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")],
        checkpoint=lambda wc: targets.landscape_checkpoint(DP[wc.dataset], wc),
    output:
        surface=targets.pattern(layout.LANDSCAPE_DIR) + "/surface.csv",
        meta=targets.pattern(layout.LANDSCAPE_DIR) + "/surface.json",
    params:
        digest=digest("landscape"),
    log:
        LOGS + "/landscape/{dataset}/lam{lam}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("landscape", attempt),
    threads: 1
    shell:
        "villani landscape --threads {threads} {PARAMS} --dataset {wildcards.dataset} --lam {wildcards.lam} "
        "> {log} 2>&1"
