"""Fig 3: the regularised objective F on a random 2-D slice, valley (λ = 0) vs bowl (λ > 0).

One column per λ of ``landscape.lambdas``: top, the 3-D surface F(θ₀ + a·δ₁ + b·δ₂) over
the grid (filter-normalised Gaussian directions δ₁, δ₂; θ₀ the initialisation or the
final checkpoint, ``landscape.center``); bottom, ``landscape.levels`` (paper 25) iso-F
contours with the viridis colour map and the centre θ₀ marked. F is in nats per token
(F = L for λ = 0).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import DOUBLE, lam_label, wrap
from villani.io.results import landscape_surface


def grid(df: pd.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, Z) meshes of a long surface table."""
    piv = df.pivot_table(index="b", columns="a", values=value)
    A, B = np.meshgrid(piv.columns.to_numpy(float), piv.index.to_numpy(float))
    return A, B, piv.to_numpy(float)


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    la = params["landscape"]
    lams = [float(x) for x in la["lambdas"]]
    fig = plt.figure(figsize=(DOUBLE, 2.9 * 2 + 0.3))
    frames = []
    for j, lam in enumerate(lams):
        df, meta = landscape_surface(params, lam, root)
        frames.append(df.assign(lam=lam))
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
        ax2.set(xlabel="a (along δ₁)", ylabel="b (along δ₂)",
                title=f"{lam_label(lam)}: {levels} iso-F levels", aspect="equal")
        ax2.grid(False)
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    fig.suptitle(wrap(f"{params['data']['name']}: F (nats/token) on a random 2-D slice θ₀ + a·δ₁ + b·δ₂ around θ₀ "
                      "(filter-normalised directions)", DOUBLE))
    return save(fig, pd.concat(frames, ignore_index=True), params, root, name)
