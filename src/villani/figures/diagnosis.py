"""The figure of ``villani diagnose``: Ψ_s(λ) of one model at its θ, with its 95% band and
its sign changes (:mod:`villani.measure.diagnose`).

One curve per s over the λ > 0 of the grid on a log-λ axis; the y axis is symlog when Ψ_s
changes sign over several decades (:func:`~villani.figures.style.value_axis`), so the
negative dip (−λd) and the positive λ²‖θ‖²/s branch are both visible. The band is the
trace's 95% interval (constant width: only tr ∇²L is estimated). Each sign change is a
vertical line with its interval shaded; an interval open on one side (the data allow no
sign change there) is hatched to the edge of the axes. The sign changes and Ψ_s(0) are
written under the axes. Drawn for a 3.5-inch column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from villani.figures.style import fmt_num, plain_log_ticks, plt, value_axis
from villani.io import atomic
from villani.measure.diagnose import describe_sign_change
from villani.diagnostics.psi import psi_key

__all__ = ["plot_psi_of_lambda", "FIGURE_FILE"]

FIGURE_FILE = "psi_of_lambda"
_COLORS = [plt.get_cmap("tab10")(i) for i in (0, 3, 2, 1)]


def _short(name: str) -> str:
    return Path(str(name).rstrip("/")).name or str(name)


def plot_psi_of_lambda(record: Mapping, curve: pd.DataFrame, out_dir: str | Path,
                       formats: Sequence[str] = ("png",), dpi: int = 200) -> list[str]:
    """Draw the curve(s) of a diagnosis and write ``psi_of_lambda.<fmt>`` into ``out_dir``."""
    fig, ax = plt.subplots(figsize=(3.5, 2.8))
    values, lines = [], []
    pos = curve[curve["lam"] > 0]
    for i, s in enumerate(record["s_values"]):
        c = pos[pos["s"] == float(s)].sort_values("lam")
        color = _COLORS[i % len(_COLORS)]
        ax.fill_between(c["lam"], c["psi_s_lo"], c["psi_s_hi"], color=color, alpha=0.25, lw=0)
        ax.plot(c["lam"], c["psi_s"], color=color, lw=1.4, label=f"Ψ$_{{{float(s):g}}}$(λ)")
        values += list(c["psi_s"]) + list(c["psi_s_lo"]) + list(c["psi_s_hi"])
        info = record["psi_s"][psi_key(s)]
        for sc in info["sign_changes"]:
            if sc["lam"] <= 0:
                continue
            ax.axvline(sc["lam"], color=color, ls="--", lw=0.9)
            lo, hi = sc["ci95"] if sc["ci95"] is not None else (sc["lam"], sc["lam"])
            is_open = lo is None or hi is None  # the data allow no sign change on that side: hatched
            ax.axvspan(lo if lo is not None else float(pos["lam"].min()),
                       hi if hi is not None else float(pos["lam"].max()), color=color, lw=0,
                       alpha=0.25 if is_open else 0.15, fill=not is_open, hatch="////" if is_open else None)
            lines.append(f"s={float(s):g}: {describe_sign_change(sc)}")
        if not info["sign_changes"]:
            lines.append(f"s={float(s):g}: no sign change on λ ≥ 0")
        lines.append(f"s={float(s):g}: Ψ(0) = {fmt_num(info['psi_at_zero'], 3)}")
    ax.axhline(0.0, color="0.3", lw=0.7)
    ax.set_xscale("log")
    value_axis(ax, np.asarray(values, dtype=float), "y")
    ax.set_xlim(float(pos["lam"].min()), float(pos["lam"].max()))
    plain_log_ticks(ax)
    ax.set_xlabel("weight decay λ")
    ax.set_ylabel("Ψ$_s$ at this θ")
    model = record["model"]
    ax.set_title(f"{_short(model['source'])}: d = {fmt_num(model['d'], 3)}, "
                 f"M = {record['trace_L']['num_probes']}", fontsize=9)
    ax.text(0.0, -0.22, "\n".join(lines), transform=ax.transAxes, ha="left", va="top", fontsize=6.5)
    if len(record["s_values"]) > 1:
        ax.legend(loc="upper center", fontsize=7)
    written = []
    for ext in formats:
        path = Path(out_dir) / f"{FIGURE_FILE}.{ext}"
        atomic.write_with(path, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=dpi, bbox_inches="tight"))
        written.append(str(path))
    plt.close(fig)
    return written
