"""Fig 3: the regularised objective F on a random 2-D slice, valley (λ = 0) vs bowl (λ > 0).

One column per λ of ``landscape.lambdas`` (0 and our λ matched to the paper's 10⁻³), around θ₀
as the caption says (``init``: the seed's step-0 checkpoint; the trained θ, ``final``, only
when ``landscape.centers`` has no ``init``): top, the 3-D surface F(θ₀ + a·δ₁ + b·δ₂) over the
grid of one slice (filter-normalised Gaussian directions δ₁, δ₂); bottom, ``landscape.levels``
(paper 25) iso-F contours with the viridis colour map, θ₀ and the grid minimum marked. The slice
drawn is a typical one, not the first: the (seed, slice) of median isotropy at λ = 0 over every
seed's slices, the same one in every column (the same θ₀ and directions). Each title gives that
slice's shape — isotropy μ_min/μ_max of the fitted quadratic, whether the minimum is unique and
interior, the weakest outward slope (10th percentile) (:mod:`villani.measure.landscape_shape`) —
and the same numbers over every slice. F is in nats per token (F = L for λ = 0).
"""

from __future__ import annotations

from typing import Callable, Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from villani.figures.style import DOUBLE, lam_label, wrap
from villani.io.results import landscape_surface
from villani.measure.landscape_shape import quadratic_isotropy, radial_slope, seed_slices, unique_minimum


def kind_drawn(params: Mapping) -> str:
    """The centre the figure draws: ``init`` (the caption's θ₀) if computed, else the first of ``landscape.centers``."""
    centers = list(params["landscape"]["centers"])
    return "init" if "init" in centers else centers[0]


def typical_slice(by_seed: Mapping[int, list[pd.DataFrame]]) -> tuple[int, int]:
    """(seed, slice) of median isotropy (the lower median) over every slice of ``by_seed``."""
    iso = sorted(((quadratic_isotropy(g) or 0.0, s, k) for s, gs in by_seed.items() for k, g in enumerate(gs)))
    _, seed, k = iso[(len(iso) - 1) // 2]
    return seed, k


def shape_text(by_seed: Mapping[int, list[pd.DataFrame]], seed: int, k: int) -> str:
    """The drawn slice's isotropy, unique minimum and radial slope, and their range over every slice."""
    parts = [g for gs in by_seed.values() for g in gs]
    iso = [quadratic_isotropy(g) or 0.0 for g in parts]
    uni = sum(unique_minimum(g) for g in parts)
    rad = [radial_slope(g) for g in parts]
    g = by_seed[seed][k]
    text = (f"drawn: isotropy {quadratic_isotropy(g) or 0.0:.2f}, {'a unique' if unique_minimum(g) else 'no unique'} "
            f"min., q₁₀ {radial_slope(g):.2g}")
    if len(parts) > 1:
        text += f"\n{len(parts)} slices: isotropy {min(iso):.2f}–{max(iso):.2f}, unique {uni}/{len(parts)}"
    return text


def grid(df: pd.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, Z) meshes of a long surface table."""
    piv = df.pivot_table(index="b", columns="a", values=value)
    A, B = np.meshgrid(piv.columns.to_numpy(float), piv.index.to_numpy(float))
    return A, B, piv.to_numpy(float)


def _panels(fig, j: int, ncol: int, lam: float, df: pd.DataFrame, levels: int, title: str):
    """Column ``j``: the 3-D surface above, the contours below; returns the contour axes."""
    A, B, Z = grid(df, "F")
    ax3 = fig.add_subplot(2, ncol, j + 1, projection="3d")
    ax3.plot_surface(A, B, Z, cmap="viridis", linewidth=0, antialiased=True, alpha=0.95)
    ax3.set(xlabel="a", ylabel="b", zlabel="F")
    ax3.set_title(f"{lam_label(lam)}: surface")
    ax3.view_init(elev=28, azim=-58)
    ax2 = fig.add_subplot(2, ncol, ncol + j + 1)
    cs = ax2.contourf(A, B, Z, levels=levels, cmap="viridis")
    ax2.contour(A, B, Z, levels=levels, colors="k", linewidths=0.3, alpha=0.5)
    ax2.plot([0], [0], marker="*", color="red", ms=11, mec="white", ls="none", label="θ₀")
    low = df.loc[df["F"].idxmin()]
    ax2.plot([low["a"]], [low["b"]], marker="o", color="white", ms=6, mec="black", ls="none", label="grid minimum")
    fig.colorbar(cs, ax=ax2, label="F (nats/token)")
    ax2.set(xlabel="a (along δ₁)", ylabel="b (along δ₂)", aspect="equal")
    ax2.set_title(f"{lam_label(lam)}: {levels} iso-F levels\n{title}")
    ax2.grid(False)
    return ax2


def render(params: Mapping, root, *, name: str, save: Callable) -> list[str]:
    la = params["landscape"]
    lams = [float(x) for x in la["lambdas"]]
    kind = kind_drawn(params)
    tables = {lam: landscape_surface(params, lam, root)[0] for lam in lams}
    by = {lam: seed_slices(t, kind) for lam, t in tables.items()}
    ref = 0.0 if 0.0 in by else lams[0]
    seed, k = typical_slice(by[ref])
    fig = plt.figure(figsize=(DOUBLE, 2.9 * 2 + 1.0))
    frames = []
    for j, lam in enumerate(lams):
        df = by[lam][seed][k]
        frames.append(df.assign(lam=lam))
        ax2 = _panels(fig, j, len(lams), lam, df, int(la["levels"]), shape_text(by[lam], seed, k))
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    at = "the initialisation θ₀ (step 0)" if kind == "init" else "the trained θ (last checkpoint)"
    n = sum(len(v) for v in by[ref].values())
    fig.suptitle(wrap(f"{params['data']['name']}: F (nats/token) on a random 2-D slice θ₀ + a·δ₁ + b·δ₂ around {at}, "
                      f"filter-normalised directions; drawn: seed {seed}, slice {k} — the median isotropy at "
                      f"{lam_label(ref)} of {n}", DOUBLE))
    return save(fig, pd.concat(frames, ignore_index=True), params, root, name)
