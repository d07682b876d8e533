"""Fig 2: Ψ_s along random radial rays θ(r) = r·u against ‖θ‖² (log x), one panel per λ.

Each line is one direction (line style per ray; the ray through a trained checkpoint is
drawn thicker), with a band of ±t·stderr around every point: Ψ_s's only stochastic part is
the Hutchinson estimate of tr ∇²L, whose standard error at that point the rays stage
stores (``trace_L_stderr``). The y axis is Ψ_s + λd = ‖∇F‖²/s − tr ∇²L: along a ray λd is
a constant, so the shape and slope are those of Ψ_s, without a shift that puts every λ > 0
at −λd (symlog when the values change sign). Each ray's line fitted to Ψ_s over its
``rays.fit_points`` largest radii (the rays stage, ``slopes.json``) is drawn as a curve in
these coordinates over the radii it was fitted to (a straight line in ‖θ‖² is curved on a
log axis); the dashed grey line has slope λ²/s through the mean at the largest radius.
Each panel's title gives the mean fitted slope over the random rays with its interval
(:func:`ray_slope_interval`: rays resampled, each slope redrawn from its Hutchinson
standard error) beside λ²/s (the asymptote of ‖∇F‖²/s the paper quotes) and λ²/(2s)
(Lemma 4's lower bound). Only the primary s (``measure.s_values[0]``) is drawn; the CSV
holds every s.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from villani.figures.style import DOUBLE, fmt_num, lam_color, lam_label, value_axis, wrap
from villani.io.results import rays_table
from villani.psi import psi_column
from villani.stats import Interval, mean_interval

LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]


def _require_psi_column(df: pd.DataFrame, s: float) -> str:
    """The Ψ_s column of rays.csv; a one-line ValueError when the file lacks it."""
    col = psi_column(s)
    if col not in df.columns:
        raise ValueError(f"rays.csv: no column {col} (columns: {', '.join(df.columns)})")
    return col


def ray_slope_interval(fits: pd.DataFrame, *, n_boot: int, confidence: float, seed: int) -> Interval | None:
    """The mean fitted slope of Ψ_s vs ‖θ‖² over the random rays of ``fits`` (rows of
    slopes.json ``fits`` at one λ and s) with the interval of
    :func:`villani.stats.mean_interval`: rays resampled, each slope redrawn from N(slope,
    se²), se its Hutchinson standard error through the fit (``slope_stderr_from_trace``) —
    the spread between directions and the trace noise of each fit. The claims ledger uses
    the same function."""
    rnd = fits[fits["kind"] == "random"] if "kind" in fits else fits
    if rnd.empty:
        return None
    se = rnd["slope_stderr_from_trace"].fillna(0.0) if "slope_stderr_from_trace" in rnd else None
    return mean_interval(rnd["slope"].to_numpy(float), None if se is None else se.to_numpy(float), n_boot=n_boot,
                         confidence=confidence, seed=seed)


def slopes(slopes_json: Mapping, s: float, claims: Mapping) -> pd.DataFrame:
    """Per λ at this s: the rays stage's summary (mean, min and max over the random rays, the
    checkpoint ray's slope, λ²/s, λ²/(2s)) and the mean slope's interval."""
    rows = [dict(r) for r in slopes_json.get("summary", []) if float(r["s"]) == float(s)]
    if not rows:
        raise ValueError(f"slopes.json: no slope summary for s = {s:g}")
    df = pd.DataFrame(rows)
    fits = fit_segments(slopes_json, s)
    lo, hi = [], []
    for lam in df["lam"]:
        iv = ray_slope_interval(fits[fits["lam"] == lam], n_boot=int(claims["bootstrap"]),
                                confidence=float(claims["confidence"]), seed=int(claims["seed"]))
        lo.append(None if iv is None else iv.low)
        hi.append(None if iv is None else iv.high)
    df["slope_ci_low"], df["slope_ci_high"] = lo, hi
    ref = df["asymptote"].where(df["asymptote"] > 0)
    df["ratio_to_asymptote"] = df["slope_mean"] / ref
    return df


def fit_segments(slopes_json: Mapping, s: float) -> pd.DataFrame:
    """The per-ray fitted lines (``slopes.json["fits"]``) at this s."""
    return pd.DataFrame([dict(f) for f in slopes_json.get("fits", []) if float(f["s"]) == float(s)])


def _sign(lo, hi) -> str:
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return "sign unresolved"
    return "> 0" if lo > 0 else "< 0" if hi < 0 else "sign unresolved"


def draw_slopes(ax, fits: pd.DataFrame, lines: pd.DataFrame, conf: float, s: float) -> None:
    """The fitted slope of every ray against λ (symlog axes): random rays as points with
    ±z·se (Hutchinson error through the fit), the checkpoint ray as an open square, the mean
    over random rays with its interval as a grey bar; λ²/s dashed, λ²/(2s) dotted."""
    z = float(sps.norm.ppf(0.5 + conf / 2))
    lams = sorted(fits["lam"].unique())
    pos = [x for x in lams if x > 0]
    for lam in lams:
        seg = lines[lines["lam"] == lam] if len(lines) else lines
        for r in seg.itertuples():
            se = float(getattr(r, "slope_stderr_from_trace", 0.0) or 0.0)
            ck = getattr(r, "kind", "random") == "checkpoint"
            ax.errorbar([lam], [r.slope], yerr=[[z * se], [z * se]], fmt="s" if ck else "o", ms=3,
                        color=lam_color(lam), mfc="none" if ck else lam_color(lam), lw=0.8)
        f = fits[fits["lam"] == lam].iloc[0]
        if f.get("slope_ci_low") is not None and not pd.isna(f.get("slope_ci_low")):
            ax.plot([lam, lam], [f["slope_ci_low"], f["slope_ci_high"]], color="0.2", lw=3, alpha=0.35,
                    solid_capstyle="butt")
    grid = np.unique(np.concatenate([[0.0], np.geomspace(min(pos), max(pos), 50)])) if pos else np.array([0.0])
    ax.plot(grid, grid**2 / s, color="0.4", ls="--", lw=0.9)
    ax.plot(grid, grid**2 / (2 * s), color="0.6", ls=":", lw=0.9)
    if pos:
        ax.set_xscale("symlog", linthresh=min(pos))
    slopes_ = np.abs(lines["slope"].to_numpy(float)) if len(lines) else np.array([1.0])
    slopes_ = slopes_[slopes_ > 0]
    linthresh = 10.0 ** np.floor(np.log10(slopes_.min())) if slopes_.size else 1.0
    ax.set_yscale("symlog", linthresh=linthresh)
    ax.set(xlabel="λ", ylabel="fitted slope of Ψ_s vs ‖θ‖²",
           title="slope per ray (±Hutchinson error), mean\n(grey: interval); λ²/s dashed, λ²/(2s) dotted")


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    df, slopes_json = rays_table(params, root)
    s = float(params["measure"]["s_values"][0])
    col = _require_psi_column(df, s)
    fits = slopes(slopes_json, s, params["claims"])
    lines = fit_segments(slopes_json, s)
    lams = sorted(df["lam"].unique())
    n = len(lams) + 1  # one panel per λ and the slopes
    ncols = 3 if n > 4 else 2
    nrows = math.ceil((n + 1) / ncols)  # and a slot for the legend
    fig, axes = plt.subplots(nrows, ncols, figsize=(DOUBLE, 2.35 * nrows + 0.5), squeeze=False)
    flat = axes.ravel()
    conf = float(params["claims"]["confidence"])
    z = float(sps.norm.ppf(0.5 + conf / 2))
    for ax, lam in zip(flat, lams):
        d = df[df["lam"] == lam].copy()
        d["y"] = d[col] + d["lam_d"]
        for i, (ray, r) in enumerate(d.groupby("ray", sort=False)):
            r = r.sort_values("theta_sq")
            through = str(r["kind"].iloc[0]) == "checkpoint" if "kind" in r else False
            ls = LINESTYLES[i % len(LINESTYLES)]
            ax.plot(r["theta_sq"], r["y"], linestyle=ls, marker="o", ms=2.5, color=lam_color(lam),
                    lw=1.6 if through else 0.9, label="ray through a checkpoint" if through else f"random ray {ray}")
            if "trace_L_stderr" in r:
                half = z * r["trace_L_stderr"].to_numpy(float)
                ax.fill_between(r["theta_sq"], r["y"] - half, r["y"] + half, color=lam_color(lam), alpha=0.13, lw=0)
        shift = float(d["lam_d"].iloc[0])
        for k, seg in enumerate(lines[lines["lam"] == lam].itertuples() if len(lines) else []):
            xs = np.geomspace(seg.theta_sq_min, seg.theta_sq_max, 60)
            ax.plot(xs, seg.intercept + shift + seg.slope * xs, color="0.15", lw=1.4, alpha=0.45,
                    label="line fitted to the largest radii" if k == 0 else None)
        ax.set_xscale("log")
        value_axis(ax, d["y"].to_numpy(float))
        f = fits[fits["lam"] == lam].iloc[0]
        ci = ("" if f.get("slope_ci_low") is None or pd.isna(f.get("slope_ci_low"))
              else f" [{fmt_num(f['slope_ci_low'], 2)}, {fmt_num(f['slope_ci_high'], 2)}]")
        ax.set_title(f"{lam_label(lam)}: slope {fmt_num(f['slope_mean'], 2)}{ci}\n"
                     f"{_sign(f.get('slope_ci_low'), f.get('slope_ci_high'))}; λ²/s = {fmt_num(f['asymptote'])}",
                     fontsize=7.5)
        ax.set(xlabel="‖θ‖² along the ray", ylabel=f"Ψ_s + λd (s = {s:g})")
    draw_slopes(flat[len(lams)], fits, lines, conf, s)
    handles, labels = flat[0].get_legend_handles_labels()
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.3, lw=0))
    labels.append(f"band: {int(round(100 * conf))}% interval of the\nHutchinson estimate of tr ∇²L")
    legend_ax = flat[len(lams) + 1]
    legend_ax.axis("off")
    legend_ax.legend(handles, labels, loc="center")
    for ax in flat[len(lams) + 2:]:
        ax.set_visible(False)
    n_random = df[df["kind"] != "checkpoint"]["ray"].nunique() if "kind" in df else df["ray"].nunique()
    extra = " and the ray through a trained checkpoint" if "kind" in df and (df["kind"] == "checkpoint").any() else ""
    fig.suptitle(wrap(f"{params['data']['name']}: Ψ_s + λd = ‖∇F‖²/s − tr ∇²L along {n_random} random radial rays"
                      f"{extra}; slopes of Ψ_s vs ‖θ‖² over the {params['rays']['fit_points']} largest radii, "
                      f"mean over random rays with its {int(100 * conf)}% interval (ray spread and trace noise)",
                      DOUBLE))
    table = pd.concat([df.assign(series="ray"), fits.assign(series="slope_summary"),
                       lines.drop(columns=["slope_parts"], errors="ignore").assign(series="slope_fit_per_ray")],
                      ignore_index=True)
    return save(fig, table, params, root, name)
