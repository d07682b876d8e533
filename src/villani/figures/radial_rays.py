"""Fig 2: Ψ_s along random radial rays θ(r) = r·u against ‖θ‖² (log x), one panel per λ.

Each line is one direction (line style per ray; the ray through a trained checkpoint is
drawn thicker). The box gives the fitted large-‖θ‖ slope of Ψ_s vs ‖θ‖² from
``slopes.json`` (the rays stage fits each ray over its ``rays.fit_points`` largest radii;
shown: mean [min, max] over the random rays, and the checkpoint ray's) beside the paper's
λ²/s and Lemma 4's λ²/(2s) (SPEC §5); the fitted lines are drawn thick and grey. The dashed grey line has slope λ²/s
through the largest-radius mean: where Ψ_s follows it, the growth is the asymptote's.
Only the primary s (``measure.s_values[0]``) is drawn; the CSV holds every s.
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import fmt_num, lam_color, lam_label, value_axis
from villani.io.results import rays_table
from villani.psi import psi_column

LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]


def _require_psi_column(df: pd.DataFrame, s: float) -> str:
    """The Ψ_s column of rays.csv; a one-line ValueError when the file lacks it."""
    col = psi_column(s)
    if col not in df.columns:
        raise ValueError(f"rays.csv: no column {col} (columns: {', '.join(df.columns)})")
    return col


def slopes(slopes_json: Mapping, s: float) -> pd.DataFrame:
    """Per λ at this s: the rays stage's fitted slopes (mean, min and max over the random
    rays, and the checkpoint ray's) beside λ²/s and λ²/(2s) (``slopes.json["summary"]``)."""
    rows = [dict(r) for r in slopes_json.get("summary", []) if float(r["s"]) == float(s)]
    if not rows:
        raise ValueError(f"slopes.json: no slope summary for s = {s:g}")
    df = pd.DataFrame(rows)
    ref = df["asymptote"].where(df["asymptote"] > 0)
    df["ratio_to_asymptote"] = df["slope_mean"] / ref
    return df


def fit_segments(slopes_json: Mapping, s: float) -> pd.DataFrame:
    """The per-ray fitted lines (``slopes.json["fits"]``) at this s."""
    return pd.DataFrame([dict(f) for f in slopes_json.get("fits", []) if float(f["s"]) == float(s)])


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    df, slopes_json = rays_table(params, root)
    s = float(params["measure"]["s_values"][0])
    col = _require_psi_column(df, s)
    fits = slopes(slopes_json, s)
    lines = fit_segments(slopes_json, s)
    lams = sorted(df["lam"].unique())
    fig, axes = plt.subplots(1, len(lams), figsize=(4.6 * len(lams), 4.6), squeeze=False)
    for ax, lam in zip(axes[0], lams):
        d = df[df["lam"] == lam]
        for i, (ray, r) in enumerate(d.groupby("ray", sort=False)):
            r = r.sort_values("theta_sq")
            through = str(r["kind"].iloc[0]) == "checkpoint" if "kind" in r else False
            ax.plot(r["theta_sq"], r[col], linestyle=LINESTYLES[i % len(LINESTYLES)], marker="o", ms=3,
                    color=lam_color(lam), lw=2.2 if through else 1.2,
                    label="through checkpoint" if through else f"ray {ray}")
        f = fits[fits["lam"] == lam].iloc[0]
        for k, seg in enumerate(lines[lines["lam"] == lam].itertuples() if len(lines) else []):
            xs = np.geomspace(seg.theta_sq_min, seg.theta_sq_max, 20)
            ax.plot(xs, seg.intercept + seg.slope * xs, color="0.25", lw=1.8, alpha=0.3,
                    label="fitted line (largest radii)" if k == 0 else None)
        top = d[d["theta_sq"] == d["theta_sq"].max()]
        x_end, y_end = float(top["theta_sq"].iloc[0]), float(top[col].mean())
        xs = np.geomspace(d["theta_sq"].min(), x_end, 60)
        ax.plot(xs, y_end + f["asymptote"] * (xs - x_end), color="0.5", ls="--", lw=1, label="slope λ²/s")
        ax.set_xscale("log")
        value_axis(ax, d[col].to_numpy(float))
        ax.set(xlabel="‖θ‖² along the ray", ylabel=f"Ψ_s = −ΔF + ‖∇F‖²/s  (s = {s:g})", title=lam_label(lam))
        ratio = "" if np.isnan(f["ratio_to_asymptote"]) else f",  mean fit / (λ²/s) = {f['ratio_to_asymptote']:.3g}"
        ck = "" if f.get("checkpoint_slope") is None or pd.isna(f.get("checkpoint_slope")) else \
            f"\ncheckpoint ray: {fmt_num(f['checkpoint_slope'])}"
        ax.text(0.0, -0.28, f"fitted slope, random rays: {fmt_num(f['slope_mean'])} [{fmt_num(f['slope_min'])}, "
                f"{fmt_num(f['slope_max'])}]{ck}\nλ²/s = {fmt_num(f['asymptote'])},  "
                f"λ²/(2s) = {fmt_num(f['lemma4_lower'])}{ratio}", transform=ax.transAxes, va="top", ha="left",
                fontsize=8, bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="0.7"))
    n_random = d[d["kind"] != "checkpoint"]["ray"].nunique() if "kind" in d else d["ray"].nunique()
    extra = " + the ray through a trained checkpoint" if "kind" in d and (d["kind"] == "checkpoint").any() else ""
    fig.suptitle(f"{params['data']['name']}: Villani diagnostic Ψ_s along {n_random} random radial rays{extra}",
                 y=1.02)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.55), fontsize=8, frameon=False)
    fig.tight_layout()
    table = pd.concat([df.assign(series="ray"), fits.assign(series="slope_summary"),
                       lines.drop(columns=["slope_parts"], errors="ignore").assign(series="slope_fit_per_ray")],
                      ignore_index=True)
    return save(fig, table, params, root, name)
