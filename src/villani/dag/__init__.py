"""The logic behind the Snakefile, testable without Snakemake.

- :mod:`.targets` — the files each rule produces and needs (every input function);
- :mod:`.jobs` — each job's ``--params`` arguments and runtime;
- :mod:`.prune` — ``villani prune``: free the weights of measured checkpoints no stage
  still needs (checkpoint files are not declared outputs, so this never triggers reruns).
"""
