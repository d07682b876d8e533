rule rays:
    input:
        data=lambda wc: [targets.data_files(DP[wc.dataset])[s] for s in ("train", "stats")],
        checkpoint=lambda wc: targets.rays_checkpoint(DP[wc.dataset]),
    output:
        samples=targets.pattern(layout.RAYS_DIR) + "/rays.csv",
        fits=targets.pattern(layout.RAYS_DIR) + "/slopes.json",
    params:
        digest=digest("rays"),
    log:
        LOGS + "/rays/{dataset}.log",
    resources:
        runtime=lambda wc, attempt: runtime_minutes("rays", attempt),
    threads: 1
    shell:
        "villani rays --threads {threads} {PARAMS} --dataset {wildcards.dataset} > {log} 2>&1"
