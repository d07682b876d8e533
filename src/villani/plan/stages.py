"""The workflow's stages, each defined once: what it reads, what it writes, what runs it.

One row per stage (:data:`TABLE`): its name (= the ``villani`` command and the Snakemake
rule), the parameter keys it reads itself (:func:`villani.plan.digest.stage_keys` expands
them; Snakemake hashes their values into the job's digest), the files DVC hashes as its
dependencies, its outputs, and how it is repeated (once, per training run, per landscape
λ). ``dvc.yaml`` is generated from this table (``villani dvc-yaml``,
:mod:`villani.dag.dvc_yaml`), so the two engines cannot drift.

Paths are :mod:`villani.plan.layout` patterns (``{root}``, ``{dataset}``, ``{variant}``,
``{lam}``, ``{seed}``); the generator turns them into DVC's templating (``${data.name}``,
``${item.lam}``). Code dependencies are folders or files of ``src/villani``.
"""

from __future__ import annotations

from dataclasses import dataclass

from villani.plan import layout

__all__ = ["Stage", "TABLE", "STAGES", "TRAIN_KEYS", "stage", "Family", "FAMILIES"]

#: In :attr:`Stage.reads`: the ``train`` keys a training job reads itself (expanded per
#: variant by :func:`villani.plan.digest.stage_keys`).
TRAIN_KEYS = "@train"
#: In :attr:`Stage.reads`: the settings of the job's own update rule (``train.langevin.lr`` …).
VARIANT_KEYS = "@variant"

_EVAL = ("data.name", "data.seq_len", "model")  # what builds a run's model for its dataset
_MEASUREMENT_SET = ("measure.blocks", "measure.batch_size", "measure.set_seed")
_SRC = "src/villani/"


@dataclass(frozen=True)
class Stage:
    """One workflow stage.

    ``reads``: dotted parameter keys (a group name stands for all its keys), with the
    markers :data:`TRAIN_KEYS` / :data:`VARIANT_KEYS`. ``deps``: layout patterns of the
    results it reads (what DVC hashes; Snakemake's inputs are finer, in
    :mod:`villani.dag.targets`) and ``src/villani`` paths of its code. ``outs``: layout
    patterns of what it writes. ``per``: ``""`` (one job per dataset), ``"run"`` (one per
    training run: λ, seed and variant are wildcards, never digest keys) or ``"lam"`` (one
    per ``landscape.lambdas``). ``args``: the ``villani`` arguments beyond the command.
    ``metrics``: outputs that are DVC metrics (flat JSON of numbers)."""

    name: str
    reads: tuple[str, ...]
    deps: tuple[str, ...]
    outs: tuple[str, ...]
    per: str = ""
    args: str = ""
    metrics: tuple[str, ...] = ()


_RUN = layout.RUN_DIR
TABLE: tuple[Stage, ...] = (
    Stage("fetch", ("data", "model.name", "model.revision", "model.init"), (_SRC + "data",), (layout.FETCH_RECORD,)),
    Stage("pretrained", ("data.name", "model.name", "model.revision", "model.init"), (layout.FETCH_RECORD, _SRC + "model.py"),
          (layout.PRETRAINED_DIR,)),
    Stage("tokenize", ("data",), (layout.FETCH_RECORD, _SRC + "data"), (layout.DATA_DIR,)),
    Stage("train", (*_EVAL, TRAIN_KEYS, VARIANT_KEYS),
          (layout.DATA_DIR + "/train.parquet", layout.DATA_STATS, layout.PRETRAINED_DIR, _SRC + "training",
           _SRC + "model.py"),
          (_RUN + "/ckpt", _RUN + "/segments", _RUN + "/logs"), per="run", args="--all"),
    Stage("measure", (*_EVAL, "train.steps", "train.checkpoints", "train.batch_size", "measure"),
          (layout.DATA_DIR, _RUN + "/ckpt", _SRC + "measure", _SRC + "curvature", _SRC + "plan/budget.py"),
          (_RUN + "/measure",), per="run", args="--all"),
    Stage("rays", (*_EVAL, *_MEASUREMENT_SET, "measure.s_values", "measure.hvp_method", "rays"),
          (layout.DATA_DIR, "{root}/runs/{dataset}/adamw/lam{first_lam}/seed{first_seed}/ckpt",
           _SRC + "measure/rays.py", _SRC + "curvature"), (layout.RAYS_DIR,)),
    Stage("landscape", (*_EVAL, *_MEASUREMENT_SET, "landscape"),
          (layout.DATA_DIR, "{root}/runs/{dataset}/adamw", _SRC + "measure/landscape.py"),
          (layout.LANDSCAPE_DIR,), per="lam"),
    Stage("bounds", ("data.name", "train.lr", "train.langevin.lr", "measure.s_values", "bounds"),
          (layout.DATA_STATS, "{root}/runs/{dataset}", _SRC + "bounds"), (layout.BOUNDS_DIR,)),
    Stage("cost", ("data.seq_len", "model", "measure.batch_size", "measure.hvp_method", "figures.model_sizes",
                   "figures.cost_repeats"),
          (layout.DATA_STATS, _SRC + "measure/hvp_cost.py", _SRC + "curvature"), ("{root}/cost/{dataset}",)),
    Stage("figures", ("data", "model", "train", "measure", "rays", "landscape", "bounds", "figures"),
          (layout.DATA_STATS, "{root}/runs/{dataset}", layout.RAYS_DIR, "{root}/landscape/{dataset}",
           layout.BOUNDS_DIR, "{root}/cost/{dataset}", _SRC + "figures"), (layout.FIGURES_DIR, layout.TABLES_DIR)),
    Stage("claims", ("data.name", "train", "measure.s_values", "rays.lambdas", "landscape.lambdas", "bounds",
                     "claims"),
          (layout.DATA_STATS, "{root}/runs/{dataset}", layout.RAYS_DIR, "{root}/landscape/{dataset}",
           layout.BOUNDS_DIR, _SRC + "claims"), (layout.CLAIMS_CSV, layout.CLAIMS_JSON, layout.CLAIMS_FINDINGS_CSV)),
    Stage("metrics", ("data.name", "train.steps", "measure.s_values"),
          ("{root}/runs/{dataset}", layout.BOUNDS_DIR, layout.CLAIMS_CSV, _SRC + "tracking"),
          (layout.PLOTS_DIR,), metrics=(layout.METRICS,)),
    # per dataset; the Snakemake job reads every dataset of the document (datasets_digest)
    Stage("paper", ("data.name", "train", "figures"),
          (layout.DATA_STATS, "{root}/runs/{dataset}", layout.BOUNDS_DIR, _SRC + "figures"),
          ("{root}/figures/paper/{dataset}", "{root}/tables/paper/{dataset}")),
)
STAGES = tuple(s.name for s in TABLE)


def stage(name: str) -> Stage:
    """The row of ``name``; a one-line error naming the stages for an unknown one."""
    for s in TABLE:
        if s.name == name:
            return s
    raise ValueError(f"unknown stage {name!r} (stages: {', '.join(STAGES)})")


@dataclass(frozen=True)
class Family:
    """The runs of one update rule (or sweep), as DVC repeats a per-run stage over them:
    ``suffix`` of the DVC stage name, the ``variant`` folder (DVC template), the lists its
    matrix runs over (``{item name: list key}``, λ and seed last), and a representative
    variant name for :func:`villani.plan.digest.stage_keys`."""

    suffix: str
    variant: str
    matrix: tuple[tuple[str, str], ...]
    example: str


_LAM_SEED = (("lam", "train.lambdas"), ("seed", "train.seeds"))
FAMILIES: tuple[Family, ...] = (
    Family("", "adamw", _LAM_SEED, "adamw"),
    Family("_lr", "adamw_lr${item.lr}", (("lr", "train.sweep.lr"), *_LAM_SEED), "adamw_lr0.001"),
    Family("_wu", "adamw_wu${item.wu}", (("wu", "train.sweep.warmup_steps"), *_LAM_SEED), "adamw_wu1"),
    *(Family(f"_{k}", k, (("lam", f"train.{k}.lambdas"), ("seed", "train.seeds")), k)
      for k in ("adamw_noise", "adam_l2", "langevin")),
)
