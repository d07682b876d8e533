# One rule per row of the stage table (src/villani/plan/stages.py): what the stage reads
# and writes, its command, threads and resources (runtime, mem_mb, gpu) all come from the
# row, through villani.dag.rules; a train or measure job is per segment / checkpoint or per run
# (jobs:, villani.dag.targets). Rules marked local run on the submit host (fetch reads
# the internet; pretrained and plan are too small to queue). The loop variable is named
# `rule`: the shell line is evaluated again when a job runs, where `rule` is the job's
# rule name (Snakemake's own argument), so every rule runs its own command.
for rule in STAGES:

    rule:
        name:
            rule
        input:
            rule_inputs(stage(rule)),
        output:
            rule_outputs(stage(rule)),
        log:
            rules.log(P, rule, ACROSS if stage(rule).per == "datasets" else "{dataset}"),
        localrule: stage(rule).local
        conda:
            # with --sdm conda; otherwise the environment Snakemake runs in
            "../envs/villani.yaml"
        threads: stage(rule).threads
        resources:
            **rule_resources(stage(rule)),
        params:
            **rule_params(stage(rule)),
            files=PARAMS,
        shell:
            rules.command(P, rule)
