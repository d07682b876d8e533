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
Each panel's title gives the mean fitted slope over the random rays and the hull of the
per-ray intervals (:func:`per_ray_intervals`, the claims ledger's: Welch–Satterthwaite
through the fit, Bonferroni over the rays) beside λ²/s (the asymptote of ‖∇F‖²/s the paper
quotes); the last panel shows each ray's slope / (λ²/s) with its interval — what Fig 2's
claims are decided on, ray by ray. Only the primary s (``measure.s_values[0]``) is drawn; the CSV
holds every s.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from villani.figures.style import DOUBLE, fmt_num, lam_color, lam_label, signed_log_ticks, value_axis, wrap
from villani.io.results import rays_table
from villani.measure.ray_slopes import ray_slope_intervals
from villani.psi import psi_column

LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]


def _require_psi_column(df: pd.DataFrame, s: float) -> str:
    """The Ψ_s column of rays.csv; a one-line ValueError when the file lacks it."""
    col = psi_column(s)
    if col not in df.columns:
        raise ValueError(f"rays.csv: no column {col} (columns: {', '.join(df.columns)})")
    return col


def slopes(slopes_json: Mapping, table: pd.DataFrame, s: float, params: Mapping) -> pd.DataFrame:
    """Per λ at this s: the rays stage's summary (mean, min and max over the random rays, the
    checkpoint ray's slope, λ²/s, λ²/(2s)), and the per-ray intervals the claims ledger uses
    (:func:`villani.measure.ray_slopes.ray_slope_intervals`, Bonferroni over the random rays):
    ``slope_ci_low``/``high`` is their hull — a sign both ends agree on holds on every ray."""
    rows = [dict(r) for r in slopes_json.get("summary", []) if float(r["s"]) == float(s)]
    if not rows:
        raise ValueError(f"slopes.json: no slope summary for s = {s:g}")
    df = pd.DataFrame(rows)
    ivs = per_ray_intervals(slopes_json, table, s, params)
    lo, hi = [], []
    for lam in df["lam"]:
        got = [iv for (la, _), iv in ivs.items() if la == lam and iv.low is not None]
        lo.append(min((iv.low for iv in got), default=None))
        hi.append(max((iv.high for iv in got), default=None))
    df["slope_ci_low"], df["slope_ci_high"] = lo, hi
    ref = df["asymptote"].where(df["asymptote"] > 0)
    df["ratio_to_asymptote"] = df["slope_mean"] / ref
    return df


def per_ray_intervals(slopes_json: Mapping, table: pd.DataFrame, s: float, params: Mapping) -> dict:
    """``{(λ, ray): Interval}`` of every random ray's slope at this s, each at confidence
    1 − α/k for the k random rays of its λ (the ledger's Fig 2 rows)."""
    fits = fit_segments(slopes_json, s)
    if fits.empty:
        return {}
    fits = fits[fits["kind"] == "random"] if "kind" in fits else fits
    out = {}
    alpha = 1.0 - float(params["claims"]["confidence"])
    for lam, g in fits.groupby("lam"):
        got = ray_slope_intervals(table, g, fit_points=int(params["rays"]["fit_points"]),
                                  num_probes=int(params["rays"]["num_probes"]), confidence=1.0 - alpha / len(g))
        out.update({(float(lam), ray): iv for ray, iv in got.items()})
    return out


def fit_segments(slopes_json: Mapping, s: float) -> pd.DataFrame:
    """The per-ray fitted lines (``slopes.json["fits"]``) at this s."""
    return pd.DataFrame([dict(f) for f in slopes_json.get("fits", []) if float(f["s"]) == float(s)])


def _y_axis(ax, y: np.ndarray) -> None:
    """Linear unless the values change sign over several decades; then asinh (linear within
    the smallest values' scale, logarithmic beyond, and smooth — symlog's kink at its
    threshold reads as a jump)."""
    y = y[np.isfinite(y)]
    big, small = (float(np.max(np.abs(y))), float(np.min(np.abs(y[y != 0])))) if np.any(y != 0) else (0.0, 0.0)
    if y.size and y.min() < 0 < y.max() and big > 30 * small:
        width = max(small, big * 1e-3)
        ax.set_yscale("asinh", linear_width=width)
        signed_log_ticks(ax.yaxis, width, big)
    else:
        value_axis(ax, y)


def draw_slopes(ax, ivs: Mapping, s: float, conf: float) -> None:
    """What the slope claims need, ray by ray (a forest plot): each random ray's fitted slope
    divided by λ²/s with its interval (Bonferroni over the rays of its λ), for every λ > 0;
    the claim at λ = 10⁻² is the band 1 ± 25%. The x axis is asinh-scaled (linear near 0,
    logarithmic beyond ±1), so ratios of either sign and any size stay readable."""
    rows = sorted(((lam, ray), iv) for (lam, ray), iv in ivs.items() if lam > 0)
    for k, ((lam, ray), iv) in enumerate(rows):
        ref = lam**2 / s
        est = iv.estimate / ref
        if iv.low is not None:
            ax.plot([iv.low / ref, iv.high / ref], [k, k], color=lam_color(lam), lw=2.2, solid_capstyle="butt")
        ax.plot([est], [k], "o", ms=3.5, color=lam_color(lam), mec="0.1", mew=0.4)
    ax.axvspan(0.75, 1.25, color="0.8", alpha=0.6, lw=0)
    ax.axvline(1.0, color="0.3", lw=0.8, ls="--", label="claim at λ = 10⁻²: 1 ± 25%")
    ax.axvline(0.0, color="0.6", lw=0.6)
    ax.set_xscale("asinh", linear_width=1.0)
    ends = [abs(v) / (lam**2 / s) for (lam, _), iv in rows for v in (iv.estimate, iv.low, iv.high) if v is not None]
    big = max(ends + [10.0])
    signed_log_ticks(ax.xaxis, 1.0, big)
    ax.set_xlim(-3 * big, 3 * big)  # room for the markers at the extremes
    ax.set_yticks(range(len(rows)), [f"{lam_label(lam)}, ray {ray}" for (lam, ray), _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="fitted slope / (λ²/s)",
           title=f"slope per ray / (λ²/s), {int(round(100 * conf))}% intervals\n(Bonferroni over each λ's rays)")
    ax.legend(fontsize=7, loc="lower left")


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    df, slopes_json = rays_table(params, root)
    s = float(params["measure"]["s_values"][0])
    col = _require_psi_column(df, s)
    fits = slopes(slopes_json, df, s, params)
    lines = fit_segments(slopes_json, s)
    lams = sorted(df["lam"].unique())
    n = len(lams) + 1  # one panel per λ and the slopes; the legend below them
    ncols = 3 if n > 4 else 2
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(DOUBLE, 2.6 * nrows + 0.9), squeeze=False)
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
        _y_axis(ax, d["y"].to_numpy(float))
        f = fits[fits["lam"] == lam].iloc[0]
        ci = ("" if f.get("slope_ci_low") is None or pd.isna(f.get("slope_ci_low"))
              else f" [{fmt_num(f['slope_ci_low'], 2)}, {fmt_num(f['slope_ci_high'], 2)}]")
        ax.set_title(f"{lam_label(lam)}, λ²/s = {fmt_num(f['asymptote'])}\nslope {fmt_num(f['slope_mean'], 2)}{ci}",
                     fontsize=7.5)
        ax.set(xlabel="‖θ‖² along the ray", ylabel=f"Ψ_s + λd (s = {s:g})")
    draw_slopes(flat[len(lams)], per_ray_intervals(slopes_json, df, s, params), s, conf)
    handles, labels = flat[0].get_legend_handles_labels()
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.3, lw=0))
    labels.append(f"band: {int(round(100 * conf))}% interval of the\nHutchinson estimate of tr ∇²L")
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    for ax in flat[len(lams) + 1:]:
        ax.set_visible(False)
    n_random = df[df["kind"] != "checkpoint"]["ray"].nunique() if "kind" in df else df["ray"].nunique()
    extra = " and the ray through a trained checkpoint" if "kind" in df and (df["kind"] == "checkpoint").any() else ""
    fig.suptitle(wrap(f"{params['data']['name']}: Ψ_s + λd = ‖∇F‖²/s − tr ∇²L along {n_random} random radial rays"
                      f"{extra}; slopes of Ψ_s vs ‖θ‖² over the {params['rays']['fit_points']} largest radii: mean over "
                      f"random rays, [hull of the per-ray {int(100 * conf)}% intervals]",
                      DOUBLE))
    table = pd.concat([df.assign(series="ray"), fits.assign(series="slope_summary"),
                       lines.drop(columns=["slope_parts"], errors="ignore").assign(series="slope_fit_per_ray")],
                      ignore_index=True)
    return save(fig, table, params, root, name)
