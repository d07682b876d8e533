"""Every path under ``results/``, in one place for the CLI, the Snakefile and DVC.

Patterns use Snakemake wildcard syntax; :func:`fmt` fills them. λ is written with
:func:`format_lam` — Python's ``repr`` of the float (0.0, 0.001, 0.0001, 1e-05), which is
exactly how DVC renders ``${item.lam}`` from params.yaml, so DVC stage outputs and the
folders the CLI writes agree — and steps zero-padded to 7 digits so paths sort by step and
a checkpoint path says its dataset, λ, seed and step.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = "results"

DATA_DIR = "{root}/data/{dataset}"
TOKENIZER_FILE, DATA_STATS_FILE, SPLIT_FILE = "tokenizer.json", "stats.json", "{split}.parquet"  # in a data folder
TOKENIZER = DATA_DIR + "/" + TOKENIZER_FILE
SPLIT = DATA_DIR + "/" + SPLIT_FILE
TRAIN_BLOCKS, VALIDATION_BLOCKS, TEST_BLOCKS = (SPLIT.replace("{split}", s) for s in ("train", "validation", "test"))
DATA_STATS = DATA_DIR + "/" + DATA_STATS_FILE
FETCH_RECORD = "{root}/fetch/{dataset}.json"  # beside, not in, tokenize's DVC output folder

# The named model (model.name) the runs start from, in the Hugging Face layout: config.json
# always, model.safetensors for model.init: pretrained; pretrained.json (written last) holds
# their sha256. Written once by the `pretrained` stage; no other job reads the hub.
PRETRAINED_DIR = "{root}/pretrained/{dataset}"
PRETRAINED_CONFIG = PRETRAINED_DIR + "/config.json"
PRETRAINED_WEIGHTS = PRETRAINED_DIR + "/model.safetensors"
PRETRAINED_META = PRETRAINED_DIR + "/pretrained.json"

RUNS_DIR = "{root}/runs/{dataset}"
# What the parameters define for a dataset (the `plan` stage, villani.dag.plan_stage): its
# runs and landscape λ, written whenever that set changes; the files of runs and surfaces
# that left it are moved under RETIRED_DIR (and back when they return), so the folders the
# summaries read hold the current ones alone.
PLAN = "{root}/plan/{dataset}.json"
RETIRED_DIR = "{root}/retired/{dataset}"
RUN_DIR = RUNS_DIR + "/{variant}/lam{lam}/seed{seed}"
# The runs a stage is centred on (villani.plan.runs.rays_center / landscape_runs): AdamW at
# {centre_lam}; the rays' the first seed ({centre_seed}), a landscape's every seed ({seed}).
CENTRE_LAM_DIR = RUNS_DIR + "/adamw/lam{centre_lam}"
CENTRE_RUN_DIR = CENTRE_LAM_DIR + "/seed{centre_seed}"
# A checkpoint is a folder that transformers' from_pretrained opens (config.json +
# model.safetensors); checkpoint.json, written last, holds our metadata and the sha256 of
# the other files; state.pt the optimizer/scheduler/RNG state (segment ends by default).
CKPT_DIR = RUN_DIR + "/ckpt/step{step}"
CKPT_WEIGHTS = CKPT_DIR + "/model.safetensors"
CKPT_CONFIG = CKPT_DIR + "/config.json"
CKPT_META = CKPT_DIR + "/checkpoint.json"
CKPT_STATE = CKPT_DIR + "/state.pt"
OLD_CKPT_FILES = tuple(RUN_DIR + f"/ckpt/step{{step}}{ext}" for ext in (".safetensors", ".json", ".state.pt"))
SEGMENT = RUN_DIR + "/segments/seg{step}.json"
CENTRE_SEGMENT = SEGMENT.replace(RUN_DIR, CENTRE_RUN_DIR)
CENTRE_SEEDS_SEGMENT = SEGMENT.replace(RUN_DIR, CENTRE_LAM_DIR + "/seed{seed}")
SEGMENT_LOG = RUN_DIR + "/logs/seg{step}.csv"
WORK_DIR = RUN_DIR + "/work"
WORK_STATE = WORK_DIR + "/state.pt"  # the interrupted segment's state (weights, optimizer, RNGs) for a resume
SEGMENT_LOG_PARTIAL = WORK_DIR + "/seg{step}.csv"  # the per-step log while its segment trains
TRAIN_LOCK = WORK_DIR + "/train.lock"  # held by the run's one training process (villani.io.one_writer)
MEASURE_LOCK = WORK_DIR + "/measure{step}.lock"  # held by the one process measuring checkpoint {step}
TENSORBOARD_DIR = RUN_DIR + "/tensorboard"  # optional event files (train.tensorboard), not a declared output
MEASURE_JSON = RUN_DIR + "/measure/step{step}.json"
MEASURE_PARQUET = RUN_DIR + "/measure/step{step}.parquet"

RAYS_DIR = "{root}/rays/{dataset}"
RAYS_CSV = RAYS_DIR + "/rays.csv"
RAYS_SLOPES = RAYS_DIR + "/slopes.json"
LANDSCAPES_DIR = "{root}/landscape/{dataset}"
LANDSCAPE_DIR = LANDSCAPES_DIR + "/lam{lam}"
SURFACE_CSV = LANDSCAPE_DIR + "/surface.csv"
SURFACE_JSON = LANDSCAPE_DIR + "/surface.json"
BOUNDS_DIR = "{root}/bounds/{dataset}"
BOUNDS_CSV = BOUNDS_DIR + "/bounds.csv"
BOUNDS_JSON = BOUNDS_DIR + "/bounds.json"
COST_CSV = "{root}/cost/{dataset}/hvp_cost.csv"
FIGURES_DIR = "{root}/figures/{dataset}"
TABLES_DIR = "{root}/tables/{dataset}"
FIGURE = FIGURES_DIR + "/{figure}"  # {figure}: name.ext, from villani.figures.figure_outputs
TABLE = TABLES_DIR + "/{figure}"
METRICS = "{root}/metrics/{dataset}.json"  # headline numbers, a DVC metric (villani.tracking.metrics)
METRICS_TABLE = "{root}/metrics/{dataset}.csv"  # every number per variant and λ
# what a run measured about itself but is no result (wall-clock seconds): beside the
# metrics, versioned by no engine (.dvcignore), so a rerun's hashes stay the same
TIMINGS = "{root}/metrics/{dataset}.timings.json"
CLAIMS_CSV = "{root}/claims/{dataset}.csv"
CLAIMS_JSON = "{root}/claims/{dataset}.json"
CLAIMS_FINDINGS_CSV = "{root}/claims/{dataset}_findings.csv"  # our findings, never counted as the paper's claims
PLOTS_DIR = "{root}/plots/{dataset}"  # DVC plot data (villani.tracking.dvc_plots)
PLOT = PLOTS_DIR + "/{plot}.csv"

# The cross-dataset figures and tables go to results/figures/paper/<datasets>/ and
# results/tables/paper/<datasets>/, <datasets> = the datasets they are drawn from joined by
# "+" (:func:`across`): a run of other datasets never overwrites them. No dataset may be
# called "paper".
ACROSS = "paper"


def across(datasets) -> str:
    """The dataset slot of the cross-dataset outputs of ``datasets``: ``paper/ptb+wikitext103``."""
    return f"{ACROSS}/" + "+".join(datasets)


VARIANTS = ("adamw", "adamw_noise", "adam_l2", "langevin")  # update rules (villani.plan.runs)
SPLITS = ("train", "validation", "test")


def format_lam(lam: float | str) -> str:
    """Canonical text of λ in paths and wildcards: ``repr(float(λ))`` (DVC's rendering)."""
    return repr(float(lam))


def format_step(step: int | str) -> str:
    return f"{int(step):07d}"


def fmt(pattern: str, root: str | Path = RESULTS, **wc) -> Path:
    """Fill a pattern; ``lam`` and ``step`` are canonicalised."""
    if "lam" in wc:
        wc["lam"] = format_lam(wc["lam"])
    if "step" in wc:
        wc["step"] = format_step(wc["step"])
    return Path(pattern.format(root=root, **wc))

