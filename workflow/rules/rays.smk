rule rays:
    input:
        data=lambda wc: [targets.data_files(P)[s] for s in ("train", "stats")],
        checkpoint=lambda wc: targets.rays_checkpoint(P),
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
        "villani rays --threads {threads} {PARAMS} > {log} 2>&1"
