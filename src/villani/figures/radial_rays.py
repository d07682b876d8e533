"""Fig 2: Ψ_s's two terms along random radial rays θ(r) = r·u, on log axes, one panel per λ.

Ψ_s = ‖∇F‖²/s − tr ∇²F. Each panel draws, against ‖θ‖² (log–log), for every ray (line style per
ray; the ray through a trained checkpoint thicker): ‖∇F‖²/s = ‖∇L + λθ‖²/s (colour of λ; exact)
and ``|tr ∇²F| = |tr ∇²L + λd|`` (grey; filled squares where tr ∇²F > 0 lowers Ψ_s, open where it
is < 0 and raises it), with a band of ±z·stderr of the Hutchinson estimate of tr ∇²L, Ψ_s's only
stochastic part. Beside them, straight lines of slope 1 on these axes: the paper's λ²‖θ‖²/s
(the asymptote of ‖∇F‖²/s, dashed), Lemma 4's λ²‖θ‖²/(2s) (dotted), and each random ray's
fitted slope b̂ of Ψ_s over its ``rays.fit_points`` largest radii (the rays stage,
``slopes.json``) as b̂·‖θ‖² over those radii (thick; dashed where b̂ < 0, drawn as ``|b̂|·‖θ‖²``):
the vertical gap between a fitted line and λ²‖θ‖²/s is the ratio b̂/(λ²/s) the ledger tests, and
Ψ_s grows by the penalty only where the dashed line reaches the data terms. Nothing is shifted
and no symlog axis hides a slope: at the paper's λ = 10⁻⁴ the penalty's λ²‖θ‖²/s lies decades
below ‖∇L‖²/s and ``|tr ∇²L|`` along every ray, and the figure shows by how much.

Each panel's title gives λ²/s and the mean fitted slope over the random rays with the hull of
the per-ray intervals (:func:`per_ray_intervals`, the claims ledger's: Bonferroni over
the rays); the last panel shows each ray's slope / (λ²/s) with its interval — what Fig 2's
claims are decided on, ray by ray. λ is the paper's (``rays.lambdas``): a ray is not trained,
so no λ·η·T match applies. Only the primary s (``measure.s_values[0]``) is drawn; the CSV holds
every s.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats as sps

from villani.figures.style import DOUBLE, fmt_num, lam_color, lam_label, signed_log_ticks, wrap
from villani.io.results import rays_table
from villani.measure.ray_slopes import ray_slope_intervals
from villani.diagnostics.psi import psi_column

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
    alpha = 1.0 - params.claims.confidence
    for lam, g in fits.groupby("lam"):
        got = ray_slope_intervals(table, g, fit_points=params.rays.fit_points, num_probes=params.rays.num_probes,
                                  confidence=1.0 - alpha / len(g))
        out.update({(float(lam), ray): iv for ray, iv in got.items()})
    return out


def fit_segments(slopes_json: Mapping, s: float) -> pd.DataFrame:
    """The per-ray fitted lines (``slopes.json["fits"]``) at this s."""
    return pd.DataFrame([dict(f) for f in slopes_json.get("fits", []) if float(f["s"]) == float(s)])


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


def _positive_log(ax, axis: str = "y") -> None:
    """Decade ticks labelled 10^k on a log axis that may span many decades."""
    from matplotlib.ticker import LogLocator

    (ax.yaxis if axis == "y" else ax.xaxis).set_major_locator(LogLocator(base=10, numticks=8))


def draw_terms(ax, d: pd.DataFrame, segs: pd.DataFrame, lam: float, s: float, z: float) -> None:
    """One λ's panel (module docstring): ‖∇F‖²/s and ``|tr ∇²F|`` along every ray, λ²‖θ‖²/s,
    λ²‖θ‖²/(2s), and each random ray's fitted b̂·‖θ‖², on log–log axes."""
    for i, (ray, r) in enumerate(d.groupby("ray", sort=False)):
        r = r.sort_values("theta_sq")
        x, lw = r["theta_sq"].to_numpy(float), 1.6 if str(r["kind"].iloc[0]) == "checkpoint" else 0.9
        ls = LINESTYLES[i % len(LINESTYLES)]
        ax.plot(x, r["grad_F_sq"] / s, linestyle=ls, marker="o", ms=2.5, color=lam_color(lam), lw=lw)
        tr = r["laplacian_F"].to_numpy(float)
        ax.plot(x, np.abs(tr), linestyle=ls, color="0.6", lw=0.8 * lw)
        ax.scatter(x[tr > 0], np.abs(tr[tr > 0]), marker="s", s=8, color="0.4", lw=0, zorder=3)
        ax.scatter(x[tr <= 0], np.abs(tr[tr <= 0]), marker="s", s=8, facecolors="none", edgecolors="0.4", lw=0.7,
                   zorder=3)
        half = z * r["trace_L_stderr"].to_numpy(float)
        lo = np.abs(tr) - half
        ax.fill_between(x, np.where(lo > 0, lo, np.abs(tr) / 10), np.abs(tr) + half, color="0.5", alpha=0.15, lw=0)
    xs = np.geomspace(float(d["theta_sq"].min()), float(d["theta_sq"].max()), 50)
    if lam > 0:
        ax.plot(xs, lam**2 * xs / s, color="0.1", ls="--", lw=1.0)
        ax.plot(xs, lam**2 * xs / (2 * s), color="0.1", ls=":", lw=1.2)
    for seg in segs.itertuples():
        x = np.geomspace(seg.theta_sq_min, seg.theta_sq_max, 20)
        ax.plot(x, abs(seg.slope) * x, color="black", lw=2.2, alpha=0.8, ls="-" if seg.slope > 0 else (0, (1.5, 0.8)),
                solid_capstyle="butt", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _positive_log(ax)


def _legend(fig, d: pd.DataFrame, conf: float) -> None:
    from matplotlib.lines import Line2D

    rays = d[["ray", "kind"]].drop_duplicates()
    h = [Line2D([], [], color="0.3", ls=LINESTYLES[i % len(LINESTYLES)], lw=1.6 if k == "checkpoint" else 0.9,
                label="ray through a checkpoint" if k == "checkpoint" else f"random ray {ray}")
         for i, (ray, k) in enumerate(zip(rays["ray"], rays["kind"]))]
    h += [Line2D([], [], color="tab:olive", marker="o", ms=3, label="‖∇F‖²/s (colour of λ)"),
          Line2D([], [], color="0.6", marker="s", ms=3.5, mfc="0.4", mec="0.4", label="|tr ∇²F|: ■ > 0, □ < 0"),
          plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.3, lw=0,
                        label=f"{int(round(100 * conf))}% interval of the Hutchinson tr ∇²L"),
          Line2D([], [], color="0.1", ls="--", label="λ²‖θ‖²/s (the paper's slope)"),
          Line2D([], [], color="0.1", ls=":", lw=1.2, label="λ²‖θ‖²/(2s) (Lemma 4)"),
          Line2D([], [], color="black", lw=2.2, alpha=0.8, label="fitted slope of Ψ_s: b̂·‖θ‖² (dashed: b̂ < 0)")]
    fig.legend(handles=h, loc="outside lower center", ncol=3, fontsize=7, frameon=False)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    df, slopes_json = rays_table(params, root)
    s = params.measure.s_values[0]
    _require_psi_column(df, s)
    fits = slopes(slopes_json, df, s, params)
    lines = fit_segments(slopes_json, s)
    lams = sorted(df["lam"].unique())
    n = len(lams) + 1  # one panel per λ and the slopes; the legend below them
    ncols = 3 if n > 4 else 2
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(DOUBLE, 2.7 * nrows + 1.1), squeeze=False)
    flat = axes.ravel()
    conf = params.claims.confidence
    z = float(sps.norm.ppf(0.5 + conf / 2))
    for ax, lam in zip(flat, lams):
        segs = lines[(lines["lam"] == lam) & (lines["kind"] == "random")] if len(lines) else lines
        draw_terms(ax, df[df["lam"] == lam], segs, lam, s, z)
        f = fits[fits["lam"] == lam].iloc[0]
        ci = ("" if f.get("slope_ci_low") is None or pd.isna(f.get("slope_ci_low"))
              else f" [{fmt_num(f['slope_ci_low'], 2)}, {fmt_num(f['slope_ci_high'], 2)}]")
        ax.set_title(f"{lam_label(lam)}: λ²/s = {fmt_num(f['asymptote'])}\nfitted b̂ = {fmt_num(f['slope_mean'], 2)}{ci}",
                     fontsize=7.5)
        ax.set(xlabel="‖θ‖² along the ray", ylabel=f"‖∇F‖²/s and |tr ∇²F| (s = {s:g})")
    draw_slopes(flat[len(lams)], per_ray_intervals(slopes_json, df, s, params), s, conf)
    _legend(fig, df, conf)
    for ax in flat[len(lams) + 1:]:
        ax.set_visible(False)
    n_random = df[df["kind"] != "checkpoint"]["ray"].nunique()
    extra = " and the ray through a trained checkpoint" if (df["kind"] == "checkpoint").any() else ""
    fig.suptitle(wrap(f"{params['data']['name']}: Ψ_s = ‖∇F‖²/s − tr ∇²F along {n_random} random radial rays{extra}, "
                      f"its two terms on log axes; fitted slopes b̂ of Ψ_s vs ‖θ‖² over the "
                      f"{params['rays']['fit_points']} largest radii (mean over random rays, [hull of the per-ray "
                      f"{int(100 * conf)}% intervals]) beside λ²/s and λ²/(2s)", DOUBLE))
    table = pd.concat([df.assign(series="ray"), fits.assign(series="slope_summary"),
                       lines.drop(columns=["slope_parts"], errors="ignore").assign(series="slope_fit_per_ray")],
                      ignore_index=True)
    return save(fig, table, params, root, name)
