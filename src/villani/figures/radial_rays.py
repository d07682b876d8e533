"""Fig 2: Ψ_s along random radial rays θ(r) = r·u against ‖θ‖² (log x), one panel per λ.

Each line is one direction (line style per ray; the ray through a trained checkpoint is
drawn thicker). The box gives the fitted large-‖θ‖ slope of Ψ_s vs ‖θ‖² from
``slopes.json`` (the rays stage's fit over the ``rays.fit_points`` largest radii) beside
the paper's λ²/s and Lemma 4's λ²/(2s) (SPEC §5). The dashed grey line has slope λ²/s
through the largest-radius mean: where Ψ_s follows it, the growth is the asymptote's.
Only the primary s (``measure.s_values[0]``) is drawn; the CSV holds every s.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.bounds import psi_slope_reference
from villani.figures.style import fmt_num, lam_color, lam_label, note
from villani.readers import psi_column as psi_key_column
from villani.readers import rays_table
from villani.stats import fit_slope

LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]


def psi_column(df: pd.DataFrame, s: float) -> str:
    for col in (psi_key_column(s), f"psi_s{s:g}", "psi_s", "psi"):
        if col in df.columns:
            return col
    raise ValueError(f"rays.csv: no Ψ_s column for s = {s:g} (columns: {', '.join(df.columns)})")


def slope_entry(slopes: Mapping, lam: float, s: float) -> dict[str, Any] | None:
    """The fitted-slope record of (λ, s) in ``slopes.json``, whichever of the layouts
    {λ: {s: {...}}}, {"lam": …} or a list of records with ``lam`` and ``s`` it uses."""
    def same(a, b) -> bool:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False

    if isinstance(slopes, Mapping) and "slopes" in slopes:
        slopes = slopes["slopes"]
    if isinstance(slopes, list):
        for rec in slopes:
            if same(rec.get("lam"), lam) and same(rec.get("s", s), s):
                return dict(rec)
        return None
    for key, per_s in slopes.items():
        if not same(key, lam) or not isinstance(per_s, Mapping):
            continue
        if "slope" in per_s:
            return dict(per_s)
        for skey, rec in per_s.items():
            if same(skey.removeprefix("s"), s) and isinstance(rec, Mapping):
                return dict(rec)
    return None


def slopes(df: pd.DataFrame, slopes_json: Mapping, s: float, fit_points: int) -> pd.DataFrame:
    """Fitted slope per λ (from slopes.json; refitted on the pooled rays when absent) and
    the reference slopes λ²/s and λ²/(2s)."""
    col = psi_column(df, s)
    rows = []
    for lam, d in df.groupby("lam"):
        ref = psi_slope_reference(lam, s)
        rec = slope_entry(slopes_json, lam, s)
        if rec is not None and rec.get("slope") is not None:
            slope, stderr, source = float(rec["slope"]), rec.get("stderr", rec.get("slope_stderr")), "slopes.json"
        else:
            xs = np.sort(d["theta_sq"].unique())[-max(int(fit_points), 2):]
            sel = d[d["theta_sq"].isin(xs)]
            fit = fit_slope(sel["theta_sq"], sel[col])
            slope, stderr, source = fit.slope, fit.stderr_slope, "refit"
        rows.append({"lam": float(lam), "s": float(s), "slope": slope,
                     "slope_stderr": np.nan if stderr is None else float(stderr),
                     "asymptote": ref["asymptote"], "lemma4_lower": ref["lemma4_lower"],
                     "ratio_to_asymptote": slope / ref["asymptote"] if ref["asymptote"] > 0 else np.nan,
                     "source": source})
    return pd.DataFrame(rows)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    df, slopes_json = rays_table(params, root)
    s = float(params["measure"]["s_values"][0])
    col = psi_column(df, s)
    fits = slopes(df, slopes_json, s, params["rays"]["fit_points"])
    lams = sorted(df["lam"].unique())
    fig, axes = plt.subplots(1, len(lams), figsize=(4.6 * len(lams), 4.0), squeeze=False)
    for ax, lam in zip(axes[0], lams):
        d = df[df["lam"] == lam]
        for i, (ray, r) in enumerate(d.groupby("ray", sort=False)):
            r = r.sort_values("theta_sq")
            through = str(r["kind"].iloc[0]) == "checkpoint" if "kind" in r else False
            ax.plot(r["theta_sq"], r[col], linestyle=LINESTYLES[i % len(LINESTYLES)], marker="o", ms=3,
                    color=lam_color(lam), lw=2.2 if through else 1.2,
                    label="through checkpoint" if through else f"ray {ray}")
        f = fits[fits["lam"] == lam].iloc[0]
        top = d[d["theta_sq"] == d["theta_sq"].max()]
        x_end, y_end = float(top["theta_sq"].iloc[0]), float(top[col].mean())
        xs = np.geomspace(d["theta_sq"].min(), x_end, 60)
        ax.plot(xs, y_end + f["asymptote"] * (xs - x_end), color="0.5", ls="--", lw=1, label="slope λ²/s")
        ax.set_xscale("log")
        ax.set(xlabel="‖θ‖² along the ray", ylabel=f"Ψ_s = −ΔF + ‖∇F‖²/s  (s = {s:g})", title=lam_label(lam))
        ratio = "" if np.isnan(f["ratio_to_asymptote"]) else f"\nfit / (λ²/s) = {f['ratio_to_asymptote']:.3g}"
        note(ax, f"fitted slope = {fmt_num(f['slope'])}\nλ²/s = {fmt_num(f['asymptote'])}\n"
                 f"λ²/(2s) = {fmt_num(f['lemma4_lower'])}{ratio}", loc="upper left")
        ax.legend(loc="best", fontsize=7)
    n_random = d[d["kind"] != "checkpoint"]["ray"].nunique() if "kind" in d else d["ray"].nunique()
    extra = " + the ray through a trained checkpoint" if "kind" in d and (d["kind"] == "checkpoint").any() else ""
    fig.suptitle(f"{params['data']['name']}: Villani diagnostic Ψ_s along {n_random} random radial rays{extra}",
                 y=1.02)
    fig.tight_layout()
    table = pd.concat([df.assign(series="ray"), fits.assign(series="slope_fit")], ignore_index=True)
    return save(fig, table, params, root, name)
