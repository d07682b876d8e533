"""Shared figure style and the one function that writes a figure and its numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from villani import atomic, layout  # noqa: E402

plt.rcParams.update({
    "figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "font.size": 10, "axes.titlesize": 11,
    "legend.fontsize": 8, "axes.spines.top": False, "axes.spines.right": False,
})


def lam_label(lam: float) -> str:
    return "λ = 0" if float(lam) == 0 else f"λ = {float(lam):g}"


def lam_colors(lams) -> dict:
    cmap = plt.get_cmap("viridis")
    lams = sorted({float(x) for x in lams})
    n = max(len(lams) - 1, 1)
    return {lam: cmap(0.9 * i / n) for i, lam in enumerate(lams)}


def save_figure(fig, data: pd.DataFrame, params: Mapping, root, name: str, kind: str = "figure") -> list[str]:
    """Write ``fig`` in every configured format and ``data`` as CSV, atomically; close the figure."""
    written = []
    if kind == "figure":
        folder = Path(layout.FIGURES_DIR.format(root=root))
        for ext in params["figures"]["formats"]:
            path = folder / f"{name}.{ext}"
            atomic.write_with(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=params["figures"]["dpi"],
                                                                      bbox_inches="tight"))
            written.append(str(path))
        plt.close(fig)
        csv_path = folder / f"{name}.csv"
    else:
        csv_path = Path(layout.TABLES_DIR.format(root=root)) / f"{name}.csv"
    atomic.write_text(csv_path, data.to_csv(index=False))
    written.append(str(csv_path))
    return written
