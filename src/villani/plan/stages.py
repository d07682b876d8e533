"""The workflow's stages, one row each: what a stage reads and writes, file by file, what
runs it and what it asks a cluster for.

Every engine is made from :data:`TABLE`: the Snakemake rules (``workflow/rules/stages.smk``
loops over the rows; inputs, outputs, command and resources through :mod:`villani.dag.rules`),
``dvc.yaml`` (``villani dvc-yaml``, :mod:`villani.dag.dvc_yaml`), the job digests
(:mod:`villani.plan.digest`), the CLI's stage commands (``villani <name>``: help, options,
work and device check, :mod:`villani.cli`), what a SLURM job asks for (GPU, threads, memory,
runtime) and the count of jobs and submissions (:mod:`villani.dag.submissions`). Adding a
stage: its row here, the names of its files in :mod:`villani.plan.layout` and its work
module (the row's ``work``), then ``villani dvc-yaml`` and ``villani docs``
(``tests/workflow/test_toy_stage.py`` adds one, touching nothing else).

Files are :mod:`villani.plan.layout` patterns. What a wildcard means depends on how the
stage repeats (``per``):

- ``{variant}``, ``{lam}``, ``{seed}`` (a run): the job's run in a per-run stage, every run
  of the dataset in a per-dataset one; ``{centre_lam}``/``{centre_seed}``: the run a
  stage is centred on (rays: the first λ, the first seed); ``{centre_lam}``/``{seed}``:
  the runs (landscape: its own λ, every seed);
- ``{step}``: the job's segment end or checkpoint, or every one of the run (segment files:
  :func:`~villani.plan.schedule.segment_ends`; measurements:
  :func:`~villani.plan.schedule.measured_steps`);
- ``{lam}`` outside a run (a landscape surface): the job's λ, or every ``landscape.lambdas``;
- ``{figure}``, ``{plot}``: every figure/table file (:func:`villani.figures.figure_outputs`)
  and DVC plot (:data:`villani.tracking.dvc_plots.PLOTS`).

Snakemake gets the files; DVC gets what its templating can name: a file as it is, a
pattern whose file name has ``{step}``, ``{figure}`` or ``{plot}`` as its folder, the
landscape's runs of every seed as the folder of its λ's runs, and in a per-dataset stage
the runs as the dataset's run folder and the surfaces as its landscape folder — which the
``plan`` stage keeps to the runs and surfaces the parameters define.
"""

from __future__ import annotations

from dataclasses import dataclass

from villani.plan import layout as L

__all__ = ["Stage", "TABLE", "STAGES", "TRAIN_KEYS", "VARIANT_KEYS", "LANDSCAPE_KEYS", "RUN_SET_KEYS", "stage", "function", "Arm",
           "ARMS"]

#: In :attr:`Stage.reads`: the ``train`` keys a training job reads itself (expanded per
#: variant by :func:`villani.plan.digest.stage_keys`).
TRAIN_KEYS = "@train"
#: In :attr:`Stage.reads`: the settings of the job's own update rule (``train.langevin.lr`` …).
VARIANT_KEYS = "@variant"
#: In :attr:`Stage.reads`: the ``landscape`` keys but its λ list (a job's λ is its wildcard).
LANDSCAPE_KEYS = "@landscape"
#: The keys that decide which runs exist.
RUN_SET_KEYS = ("train.lambdas", "train.seeds", "train.sweep", "train.adamw_noise.lambdas",
                "train.adam_l2.lambdas", "train.langevin.lambdas")

_EVAL = ("data.name", "data.seq_len", "model")  # what builds a run's model for its dataset
_MEASUREMENT_SET = ("measure.blocks", "measure.batch_size", "measure.set_seed")
_SRC = "src/villani/"
_DATA = (L.TRAIN_BLOCKS, L.VALIDATION_BLOCKS, L.DATA_STATS)
_RUNS = (L.PLAN, L.SEGMENT, L.SEGMENT_LOG)  # of every run (with the checkpoints' JSON the manifests certify)
_MEASURED = (L.MEASURE_JSON, L.MEASURE_PARQUET)
_SURFACES = (L.SURFACE_CSV, L.SURFACE_JSON)
_RAYS = (L.RAYS_CSV, L.RAYS_SLOPES)
_BOUNDS = (L.BOUNDS_CSV, L.BOUNDS_JSON)
_CLAIMS = (L.CLAIMS_CSV, L.CLAIMS_JSON, L.CLAIMS_FINDINGS_CSV)


@dataclass(frozen=True)
class Stage:
    """One workflow stage: everything Snakemake, DVC, the CLI and a cluster are told about it.

    ``name``: the ``villani`` command and the Snakemake rule. ``reads``: the dotted
    parameter keys it reads itself (a group name stands for all its keys; markers
    :data:`TRAIN_KEYS`, :data:`VARIANT_KEYS`). ``inputs`` / ``outputs``: the results it
    reads / writes, layout patterns (module doc). ``versioned``: what it writes that only DVC
    versions (checkpoint folders, which ``villani prune`` thins without making work).
    ``code``: its code under ``src/villani`` (DVC's dependencies; Snakemake watches the
    command). ``per``: ``""`` one job per dataset, ``"run"`` per training run, ``"lam"`` per
    ``landscape.lambdas``, ``"datasets"`` one over every dataset of the document.

    The command: ``villani <name> [--threads N] --params … [--dataset D] <command>`` —
    ``command`` is what follows ``--dataset``, with the job's wildcards (``{variant}``,
    ``{lam}``, ``{seed}``; ``{step}``: the segment end or checkpoint, ``--all`` for a job per
    run — :mod:`villani.dag.rules` fills them for Snakemake, :mod:`villani.dag.dvc_yaml` for
    DVC, :mod:`villani.plan.writers` for a message). ``stops``: it saves its work on SIGTERM
    (:mod:`villani.runtime.stop`), so its shell line execs it and the signal reaches it.
    ``help``: the command's one line in ``villani --help``; ``work``: ``"module:function"``
    the CLI calls with the parsed arguments (``""``: ``villani.cli.commands:cmd_<name>``);
    ``options``: ``"module:function"`` adding the command's own options to its parser.

    What a job asks for: ``gpu`` (one GPU, and the command checks ``--device`` first),
    ``threads`` (CPUs of a cluster job — per GPU for a GPU stage — and ``--threads``; a
    profile's ``max-threads`` caps them), ``mem_mb`` (megabytes × attempt, at most
    :data:`villani.dag.resources.MEM_CAP_MB`) and ``runtime`` (minutes × attempt) — None for
    both where ``estimate`` names the ``"module:function"`` giving (seconds, host bytes) of a
    job from the parameters and its step (:mod:`villani.dag.resources`). ``local``: runs on the submit host
    (it reads the internet, or is too small to queue). ``target``: its outputs are targets of
    the workflow (``rule all``), not only inputs of other stages. ``metrics``: outputs that
    are DVC metrics."""

    name: str
    reads: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    code: tuple[str, ...]
    per: str = ""
    command: str = ""
    stops: bool = False
    help: str = ""
    work: str = ""
    options: str = ""
    gpu: bool = False
    threads: int = 1
    mem_mb: int | None = 8000
    runtime: int | None = 60
    estimate: str = ""
    local: bool = False
    target: bool = True
    versioned: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()


_RUN = "--variant {variant} --lam {lam} --seed {seed}"  # a per-run job's run
_GPU = dict(gpu=True, threads=8)  # one A100 and 8 CPUs beside it (torch's intra-op threads)

TABLE: tuple[Stage, ...] = (
    Stage("fetch", ("data", "model.name", "model.revision", "model.init"), (), (L.FETCH_RECORD,), (_SRC + "data",),
          local=True, help="download corpus, tokenizer and pretrained model into the Hugging Face cache (once, on a "
          "machine with internet); every dataset unless --dataset"),
    Stage("pretrained", ("data.name", "model.name", "model.revision", "model.init"), (L.FETCH_RECORD,),
          (L.PRETRAINED_META,), (_SRC + "model",), runtime=30, local=True, versioned=(L.PRETRAINED_DIR,),
          help="save model.name's config (and for init: pretrained its weights) into results/pretrained/<dataset>/, "
          "from the Hugging Face cache"),
    Stage("plan", RUN_SET_KEYS + ("landscape.lambdas",), (), (L.PLAN,), (_SRC + "dag/plan_stage.py",), runtime=10,
          local=True, help="write results/plan/<dataset>.json (the runs and landscape λ of the parameters); move the "
          "folders of runs and surfaces no longer in them to results/retired/"),
    # WikiText-103's BPE tokenizer and blocks: 8 workers, 2 h
    Stage("tokenize", ("data",), (L.FETCH_RECORD,), (L.TRAIN_BLOCKS, L.VALIDATION_BLOCKS, L.TEST_BLOCKS, L.TOKENIZER,
                                                    L.DATA_STATS), (_SRC + "data",), threads=8, mem_mb=16000,
          runtime=120, help="read the corpus, train/load the tokenizer, write token blocks"),
    Stage("train", (*_EVAL, TRAIN_KEYS, VARIANT_KEYS), (L.TRAIN_BLOCKS, L.DATA_STATS, L.PRETRAINED_META),
          (L.SEGMENT, L.SEGMENT_LOG), (_SRC + "training", _SRC + "model"), per="run",
          command=_RUN + " --until {step}", stops=True, options="villani.cli.options:train_options", **_GPU,
          mem_mb=None, runtime=None, estimate="villani.dag.resources:train_work", versioned=(L.RUN_DIR + "/ckpt",),
          help="train one run up to a checkpoint (one segment) or to the end"),
    Stage("measure", (*_EVAL, "train.steps", "train.checkpoints", "train.batch_size", "measure"),
          (*_DATA, L.SEGMENT), _MEASURED, (_SRC + "measure", _SRC + "curvature", _SRC + "plan/budget.py"), per="run",
          command=_RUN + " --step {step}", options="villani.cli.options:measure_options", **_GPU, mem_mb=None,
          runtime=None, estimate="villani.dag.resources:measure_work",
          help="curvature measurement of one checkpoint (or all of a run)"),
    Stage("rays", (*_EVAL, *_MEASUREMENT_SET, "measure.s_values", "measure.hvp_method", "rays"),
          (L.TRAIN_BLOCKS, L.DATA_STATS, L.CENTRE_SEGMENT), _RAYS, (_SRC + "measure/rays.py", _SRC + "curvature"),
          **_GPU, mem_mb=48000, runtime=120, help="Ψ_s along radial rays (Fig 2)"),
    Stage("landscape", (*_EVAL, *_MEASUREMENT_SET, "train.seeds", LANDSCAPE_KEYS),
          (L.TRAIN_BLOCKS, L.DATA_STATS, L.CENTRE_SEEDS_SEGMENT),
          _SURFACES, (_SRC + "measure/landscape.py",), per="lam", command="--lam {lam}",
          options="villani.cli.options:surface_options", **_GPU, mem_mb=48000, runtime=180,
          help="2-D loss surface (Fig 3)"),
    Stage("bounds", ("data.name", "train.lr", "train.langevin.lr", "measure.s_values", "bounds"),
          (L.DATA_STATS, L.PLAN, *_MEASURED), _BOUNDS, (_SRC + "bounds",), runtime=20,
          help="bounds table of the paper's section V"),
    Stage("cost", ("data.seq_len", "model", "measure.batch_size", "measure.hvp_method", "figures.model_sizes",
                   "figures.cost_repeats"), (L.DATA_STATS,), (L.COST_CSV,),
          (_SRC + "measure/hvp_cost.py", _SRC + "curvature"), **_GPU, mem_mb=32000, runtime=60,
          help="HVP seconds and peak memory vs model size (Fig 10)"),
    Stage("figures", ("data", "model", "train", "measure", "rays", "landscape", "bounds", "figures",
                         "claims.paper_corpus"),
          (L.DATA_STATS, *_RUNS, *_MEASURED, *_RAYS, *_SURFACES, *_BOUNDS, L.COST_CSV), (L.FIGURE, L.TABLE),
          (_SRC + "figures",), runtime=30, help="render every figure and table"),
    Stage("claims", ("data.name", "train", "measure.s_values", "rays.lambdas", "landscape.lambdas", "bounds", "claims"),
          (L.DATA_STATS, *_RUNS, *_MEASURED, *_RAYS, *_SURFACES, *_BOUNDS), _CLAIMS, (_SRC + "claims",), runtime=20,
          help="write results/claims/<dataset>.csv: a verdict on every claim of the paper"),
    Stage("metrics", ("data.name", "train.steps", "measure.s_values"), (*_RUNS, *_MEASURED, *_BOUNDS, *_CLAIMS),
          (L.METRICS, L.METRICS_TABLE, L.PLOT), (_SRC + "tracking",), runtime=10, metrics=(L.METRICS,),
          help="write results/metrics/<dataset>.json (headline numbers), results/metrics/<dataset>.csv (every number per variant and λ) and results/plots/<dataset>/ (DVC plot data)"),
    Stage("paper", ("data.name", "train", "figures"), (L.DATA_STATS, *_RUNS, *_MEASURED, *_BOUNDS),
          (L.FIGURE, L.TABLE), (_SRC + "figures",), per="datasets", runtime=30,
          help="render the cross-dataset figures and tables of every dataset (results/figures/paper/, "
          "results/tables/paper/)"),
)
STAGES = tuple(s.name for s in TABLE)


def function(ref: str):
    """The function a row's ``"module:function"`` (``work``, ``options``, ``estimate``) names,
    its module imported now."""
    import importlib

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def stage(name: str) -> Stage:
    """The row of ``name``; a one-line error naming the stages for an unknown one."""
    for s in TABLE:
        if s.name == name:
            return s
    raise ValueError(f"unknown stage {name!r} (stages: {', '.join(STAGES)})")


@dataclass(frozen=True)
class Arm:
    """The runs of one update rule or sweep, as DVC repeats a per-run stage over them:
    ``suffix`` of the DVC stage name, the ``variant`` folder (DVC template), the lists its
    matrix runs over (``{item name: list key}``, λ and seed last), and a representative
    variant name for :func:`villani.plan.digest.stage_keys`."""

    suffix: str
    variant: str
    matrix: tuple[tuple[str, str], ...]
    example: str


_LAM_SEED = (("lam", "train.lambdas"), ("seed", "train.seeds"))
ARMS: tuple[Arm, ...] = (
    Arm("", "adamw", _LAM_SEED, "adamw"),
    Arm("_lr", "adamw_lr${item.lr}", (("lr", "train.sweep.lr"), *_LAM_SEED), "adamw_lr0.001"),
    Arm("_wu", "adamw_wu${item.wu}", (("wu", "train.sweep.warmup_steps"), *_LAM_SEED), "adamw_wu1"),
    *(Arm(f"_{k}", k, (("lam", f"train.{k}.lambdas"), ("seed", "train.seeds")), k)
      for k in ("adamw_noise", "adam_l2", "langevin")),
)
