"""``results/plots/{dataset}/*.csv``: the data of DVC's plots (``plots:`` in dvc.yaml).

DVC draws a plot from one CSV and a Vega-Lite template. The figure CSVs hold several
series in long format, which DVC's stock templates draw as one line through every run;
these files hold one series each, and the project's templates
(``.dvc/plots/villani_runs.json``, ``villani_lam_scatter.json``) draw one line per run
(``run``) coloured by ``group`` (variant and λ), and scatters coloured by λ (``lam``).
Every row carries ``variant``, ``lam`` (Python's repr, as in paths), ``seed``, ``run`` and
``group``. The numbers are those of the figures, not new ones:

- ``training_loss.csv`` — Fig 5's training loss per run: the mean over each window of
  ``ceil(T / 400)`` steps, at the window's last step (at most ~400 points per run, also
  at paper scale);
- ``psi_vs_ppl.csv`` — Fig 7: Ψ_s at the first ``measure.s_values`` (``psi_s``) and the
  validation perplexity at every checkpoint;
- ``spectrum.csv`` — Fig 4: λ_max of ∇²F against ‖θ‖² at every checkpoint;
- ``trace_cv.csv`` — Fig 9: the measured relative error ``stderr / |tr ∇²L|`` of the
  Hutchinson estimate at every checkpoint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Mapping

from villani.plan import layout
from villani.plan.runs import runs
from villani.diagnostics.psi import psi_column

if TYPE_CHECKING:
    import pandas as pd
# pandas and the readers are imported where the tables are made: the Snakefile's parse
# imports this module for plot_outputs alone.

POINTS_PER_RUN = 400


def _labelled(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``run`` and ``group`` labels from the variant, λ and seed columns."""
    lam = df["lam"].map(layout.format_lam)
    group = df["variant"] + " λ=" + lam
    return df.assign(lam=lam, group=group, run=group + " seed " + df["seed"].astype(str))


def training_loss(params: Mapping, root) -> pd.DataFrame:
    """Per run: loss (window mean) at step (the window's last), windows of ceil(T/400) steps."""
    import pandas as pd

    from villani.io.results import training_log

    window = max(1, math.ceil(params["train"]["steps"] / POINTS_PER_RUN))
    frames = []
    for r in runs(params):
        log = training_log(params, r, root)
        w = (log["step"] - log["step"].min()) // window
        g = log.groupby(w)
        frames.append(pd.DataFrame({"step": g["step"].max(), "loss": g["loss"].mean()})
                      .assign(variant=r.variant, lam=r.lam, seed=r.seed))
    return _labelled(pd.concat(frames, ignore_index=True))


def psi_vs_ppl(params: Mapping, root) -> pd.DataFrame:
    from villani.io.results import measurements

    m = measurements(params, root)
    col = psi_column(params["measure"]["s_values"][0])
    return _labelled(m[["variant", "lam", "seed", "step"]].assign(psi_s=m[col], val_ppl=m["val_ppl"]))


def spectrum(params: Mapping, root) -> pd.DataFrame:
    from villani.io.results import measurements

    m = measurements(params, root)
    return _labelled(m[["variant", "lam", "seed", "step", "theta_sq_norm", "lambda_max"]])


def trace_cv(params: Mapping, root) -> pd.DataFrame:
    from villani.io.results import measurements

    m = measurements(params, root)
    return _labelled(m[["variant", "lam", "seed", "step"]].assign(cv_mean_measured=m["trace_L_rel_stderr"]))


PLOTS: dict[str, Callable[[Mapping, str], pd.DataFrame]] = {
    "training_loss": training_loss, "psi_vs_ppl": psi_vs_ppl, "spectrum": spectrum, "trace_cv": trace_cv,
}


#: How DVC draws each plot CSV (``plots:`` of dvc.yaml, generated): template, axes, titles.
DVC_PLOTS: dict[str, dict] = {
    "training_loss": {"template": "villani_runs", "x": "step", "y": "loss",
                      "title": "Training loss per run (window means)", "x_label": "optimizer step",
                      "y_label": "training loss (nats/token)"},
    "psi_vs_ppl": {"template": "villani_lam_scatter", "x": "psi_s", "y": "val_ppl",
                   "title": "Villani diagnostic vs validation perplexity, every checkpoint",
                   "x_label": "Ψ_s at the first measure.s_values", "y_label": "validation perplexity"},
    "spectrum": {"template": "villani_lam_scatter", "x": "theta_sq_norm", "y": "lambda_max",
                 "title": "Largest Hessian eigenvalue vs parameter norm, every checkpoint", "x_label": "‖θ‖²",
                 "y_label": "λ_max of ∇²F"},
    "trace_cv": {"template": "villani_lam_scatter", "x": "step", "y": "cv_mean_measured",
                 "title": "Relative error of the Hutchinson trace (measured), every checkpoint",
                 "x_label": "optimizer step", "y_label": "stderr / |tr ∇²L|"},
}


def plot_outputs(root: str = layout.RESULTS, dataset: str = "{dataset}") -> list[str]:
    """The files :func:`write_plots` writes for ``dataset`` (default: the Snakemake wildcard)."""
    return [f"{layout.PLOTS_DIR.format(root=root, dataset=dataset)}/{name}.csv" for name in PLOTS]


def write_plots(params: Mapping, root: str = layout.RESULTS) -> list[str]:
    """Write every plot CSV atomically, once all are computed; return their paths."""
    from villani.io import atomic

    texts = {layout.fmt(layout.PLOTS_DIR, root, dataset=params["data"]["name"]) / f"{name}.csv": table(params, root).to_csv(index=False)
             for name, table in PLOTS.items()}
    for path, text in texts.items():
        atomic.write_text(path, text)
    return [str(p) for p in texts]
