"""What a parameter document asks for, before anything runs.

- :mod:`.config` — load, merge, fill defaults and validate the parameters (the schema is
  their documentation); :class:`~.config.ParamsError`;
- :mod:`.digest` — the hash of the keys each job reads (Snakemake's rerun trigger);
- :mod:`.schedule` — checkpoint steps and training segments (a static DAG);
- :mod:`.runs` — the training runs (dataset, variant, λ, seed) and the runs/steps that the
  rays and the landscape are centred on;
- :mod:`.layout` — every path under ``results/``.
- :mod:`.budget` — the most Hessian-vector products a measure job may take, by phase.

Nothing here reads results or imports torch.
"""
