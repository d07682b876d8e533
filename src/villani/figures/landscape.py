"""Fig 3: the regularised objective F on a random 2-D slice, valley (λ = 0) vs bowl (λ > 0).

One column per λ of ``landscape.lambdas`` (0 and our λ matched to the paper's 10⁻³): top,
the 3-D surface F(θ₀ + a·δ₁ + b·δ₂) over the grid of slice 0 (filter-normalised Gaussian
directions δ₁, δ₂; θ₀ the initialisation or the final checkpoint, ``landscape.center``);
bottom, ``landscape.levels`` (paper 25) iso-F contours with the viridis colour map, the
centre θ₀ and the grid minimum marked, and the slice's shape in the title — isotropy
μ_min/μ_max of the fitted quadratic, whether the minimum is unique and interior, the
weakest outward slope (10th percentile) (:mod:`villani.measure.landscape_shape`) — with the same numbers'
range over every slice. F is in nats per token (F = L for λ = 0).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import DOUBLE, lam_label, wrap
from villani.io.results import landscape_surface
from villani.measure.landscape_shape import quadratic_isotropy, radial_slope, unique_minimum


def slices(df: pd.DataFrame) -> list[pd.DataFrame]:
    """The surface table's slices, slice 0 first (a table without a ``slice`` column is one slice)."""
    if "slice" not in df:
        return [df]
    return [g.drop(columns="slice") for _, g in df.groupby("slice", sort=True)]


def shape_text(df: pd.DataFrame) -> str:
    """Slice 0's isotropy, unique minimum and radial slope, and their range over every slice."""
    parts = slices(df)
    iso = [quadratic_isotropy(g) or 0.0 for g in parts]
    uni = [unique_minimum(g) for g in parts]
    rad = [radial_slope(g) for g in parts]
    text = f"isotropy {iso[0]:.2f}, {'unique' if uni[0] else 'no unique'} min., radial q₁₀ {rad[0]:.3g}"
    if len(parts) > 1:
        text += (f"\n{len(parts)} slices: {min(iso):.2f}–{max(iso):.2f}, unique {sum(uni)}/{len(parts)}, "
                 f"{min(rad):.3g}–{max(rad):.3g}")
    return text


def grid(df: pd.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, Z) meshes of a long surface table."""
    piv = df.pivot_table(index="b", columns="a", values=value)
    A, B = np.meshgrid(piv.columns.to_numpy(float), piv.index.to_numpy(float))
    return A, B, piv.to_numpy(float)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    la = params["landscape"]
    lams = [float(x) for x in la["lambdas"]]
    fig = plt.figure(figsize=(DOUBLE, 2.9 * 2 + 0.9))
    frames = []
    for j, lam in enumerate(lams):
        table, meta = landscape_surface(params, lam, root)
        frames.append(table.assign(lam=lam))
        df = slices(table)[0]
        A, B, Z = grid(df, "F")
        levels = int(meta.get("levels", la["levels"]))
        center = meta.get("center") or {}
        kind = center.get("kind", la["center"]) if isinstance(center, dict) else center
        step = center.get("step") if isinstance(center, dict) else None
        where = f"θ₀ = {kind}" + (f" (step {step})" if step is not None else "")
        ax3 = fig.add_subplot(2, len(lams), j + 1, projection="3d")
        ax3.plot_surface(A, B, Z, cmap="viridis", linewidth=0, antialiased=True, alpha=0.95)
        ax3.set(xlabel="a", ylabel="b", zlabel="F")
        ax3.set_title(f"{lam_label(lam)}: surface, {where}")
        ax3.view_init(elev=28, azim=-58)
        ax2 = fig.add_subplot(2, len(lams), len(lams) + j + 1)
        cs = ax2.contourf(A, B, Z, levels=levels, cmap="viridis")
        ax2.contour(A, B, Z, levels=levels, colors="k", linewidths=0.3, alpha=0.5)
        ax2.plot([0], [0], marker="*", color="red", ms=11, mec="white", ls="none", label="θ₀")
        if isinstance(meta.get("argmin"), dict):
            ax2.plot([meta["argmin"]["a"]], [meta["argmin"]["b"]], marker="o", color="white", ms=6, mec="black",
                     ls="none", label="grid minimum")
        fig.colorbar(cs, ax=ax2, label="F (nats/token)")
        ax2.set(xlabel="a (along δ₁)", ylabel="b (along δ₂)", aspect="equal")
        ax2.set_title(f"{lam_label(lam)}: {levels} iso-F levels\n{shape_text(table)}")
        ax2.grid(False)
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    fig.suptitle(wrap(f"{params['data']['name']}: F (nats/token) on a random 2-D slice θ₀ + a·δ₁ + b·δ₂ around θ₀ "
                      "(filter-normalised directions; slice 0 drawn)", DOUBLE))
    return save(fig, pd.concat(frames, ignore_index=True), params, root, name)
