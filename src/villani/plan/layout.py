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
TOKENIZER = DATA_DIR + "/tokenizer.json"
SPLIT = DATA_DIR + "/{split}.parquet"
DATA_STATS = DATA_DIR + "/stats.json"
FETCH_RECORD = "{root}/fetch/{dataset}.json"  # beside, not in, tokenize's DVC output folder

RUN_DIR = "{root}/runs/{dataset}/{variant}/lam{lam}/seed{seed}"
CKPT_WEIGHTS = RUN_DIR + "/ckpt/step{step}.safetensors"
CKPT_META = RUN_DIR + "/ckpt/step{step}.json"
CKPT_STATE = RUN_DIR + "/ckpt/step{step}.state.pt"
SEGMENT = RUN_DIR + "/segments/seg{step}.json"
SEGMENT_LOG = RUN_DIR + "/logs/seg{step}.csv"
WORK_DIR = RUN_DIR + "/work"
SEGMENT_LOG_PARTIAL = WORK_DIR + "/seg{step}.csv"  # the per-step log while its segment trains
TENSORBOARD_DIR = RUN_DIR + "/tensorboard"  # optional event files (train.tensorboard), not a declared output
MEASURE_JSON = RUN_DIR + "/measure/step{step}.json"
MEASURE_PARQUET = RUN_DIR + "/measure/step{step}.parquet"

RAYS_DIR = "{root}/rays/{dataset}"
LANDSCAPE_DIR = "{root}/landscape/{dataset}/lam{lam}"
BOUNDS_DIR = "{root}/bounds/{dataset}"
FIGURES_DIR = "{root}/figures"
TABLES_DIR = "{root}/tables"
COST_CSV = "{root}/cost/hvp_cost.csv"
METRICS = "{root}/metrics.json"
CLAIMS_CSV = "{root}/claims.csv"
CLAIMS_JSON = "{root}/claims.json"
PLOTS_DIR = "{root}/plots"  # DVC plot data (villani.figures.dvc_plots)

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

