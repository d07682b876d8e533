"""Shared figure style and the one function that writes a figure and its numbers.

**Style.** One style file, ``villani.mplstyle`` (next to this module): figures are drawn
at their print size — :data:`SINGLE` = 3.5 in (one column) or :data:`DOUBLE` = 7.2 in (two
columns) wide — with every text at least :data:`MIN_FONT_PT` = 7 pt, so nothing is scaled
down on paper; :func:`save_figure` saves at exactly that size (no tight bounding box that
would grow the figure) and refuses another width.

Colours are fixed per λ value across every figure (:func:`lam_color`): λ = 0 is black,
and each half decade of λ > 0 has its own hue from matplotlib's qualitative ``tab10``
(grey left out), so the same λ has the same colour in Fig 2 (the ray λs) and Fig 5 (the
training λs), and neighbouring decades are easy to tell apart. Each update rule (variant)
has its own line style and marker (:func:`variant_style`). Weight decay is λ; eigenvalues
of the Hessian are μ (μ_max, μ_median), so the two never share a symbol.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Iterable, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from villani.io import atomic  # noqa: E402
from villani.plan import layout  # noqa: E402
from villani.plan.runs import variant_kind  # noqa: E402

STYLE = Path(__file__).with_name("villani.mplstyle")
plt.style.use(str(STYLE))

SINGLE, DOUBLE = 3.5, 7.2  # journal column widths, inches
MIN_FONT_PT = 7.0

ZERO_COLOR = "black"
_QUALITATIVE = [plt.get_cmap("tab10")(i) for i in (0, 3, 2, 1, 4, 8, 5, 6, 9)]


def lam_label(lam: float) -> str:
    return "λ = 0" if float(lam) == 0 else f"λ = {float(lam):g}"


_VARIANT_STYLE = {
    "adamw": {"ls": "-", "marker": "o"},
    "adam_l2": {"ls": "-.", "marker": "s"},
    "langevin": {"ls": "--", "marker": "^"},
    "adamw_noise": {"ls": ":", "marker": "D"},
}


def variant_style(variant: str) -> dict:
    """Line style and marker of a variant (sweep arms: dotted-dash, ▽)."""
    if variant in _VARIANT_STYLE:
        return dict(_VARIANT_STYLE[variant])
    return {"ls": (0, (3, 1, 1, 1)), "marker": "v"}


_SHORT = {"adamw": "AdamW", "adam_l2": "Adam on F", "langevin": "Langevin (eq. 36)", "adamw_noise": "noisy AdamW"}


def variant_label(variant: str) -> str:
    """Short legend text of a variant (AdamW, Adam on F, Langevin (eq. 36), noisy AdamW; a
    sweep arm's setting); :data:`villani.plan.runs.DESCRIPTION` says more."""
    kind = variant_kind(variant)
    if variant == kind:
        return _SHORT[kind]
    return f"AdamW {variant.removeprefix('adamw_').replace('lr', 'η = ').replace('wu', 'warm-up ')}"


def run_label(variant: str, lam: float) -> str:
    """``λ = 0.1, AdamW (decoupled weight decay)`` — the λ and the update rule of a run."""
    return f"{lam_label(lam)}, {variant_label(variant)}"


def lam_color(lam: float):
    """The colour of λ in every figure."""
    lam = float(lam)
    if lam == 0:
        return ZERO_COLOR
    # one distinct hue per half decade (tab10 minus its grey), the same λ → the same colour everywhere
    k = int(round(2 * math.log10(lam)))
    return _QUALITATIVE[k % len(_QUALITATIVE)]


def middle_lam(lams: Iterable[float], prefer: float = 1e-3) -> float:
    """The λ of Fig 8: ``prefer`` (the paper's 1e-3) if present, else the middle positive λ."""
    pos = sorted(float(x) for x in lams if float(x) > 0)
    if not pos:
        return sorted(float(x) for x in lams)[0]
    if prefer in pos:
        return prefer
    return pos[(len(pos) - 1) // 2]


def value_axis(ax, values, axis: str = "y", *, decades: float = 1.5) -> None:
    """Log scale when the values are positive and span more than ``decades`` decades,
    symlog when they change sign over several decades, linear otherwise."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    setter = ax.set_yscale if axis == "y" else ax.set_xscale
    if v.size < 2:
        return
    if np.all(v > 0) and np.log10(v.max() / v.min()) > decades:
        setter("log")
    elif np.any(v < 0) and np.any(v > 0):
        nz = np.abs(v[v != 0])
        if nz.size and np.log10(nz.max() / nz.min()) > 2 * decades:
            linthresh = 10.0 ** np.floor(np.log10(float(np.quantile(nz, 0.1))))
            setter("symlog", linthresh=linthresh)
            signed_log_ticks(ax.yaxis if axis == "y" else ax.xaxis, linthresh, float(nz.max()))


def plain_log_ticks(ax) -> None:
    """Log axes with plain-number labels and unlabelled minor ticks (no overlaps); axes
    spanning less than 2.5 decades get labels at 1, 2 and 5 × 10^k. Call after the limits
    are final."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis, scale, lim in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()), (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
        if scale == "log":
            lo, hi = sorted(lim)
            if lo > 0 and math.log10(hi / lo) < 2.5:
                axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def signed_log_ticks(axis, linthresh: float, vmax: float, most: int = 4) -> None:
    """At most ``most`` decades labelled on each side of 0 on a symlog or asinh axis (linear
    within ``linthresh``), as ±10^k; none inside the linear part but 0 (they would crowd it)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    k0, k1 = int(np.floor(np.log10(linthresh))), int(np.ceil(np.log10(vmax)))
    step = max(1, int(np.ceil((k1 - k0 + 1) / most)))
    ks = [k for k in range(k1, k0 - 1, -step) if k > k0]  # ±linthresh would crowd the 0 label
    ticks = sorted([0.0] + [10.0**k for k in ks] + [-(10.0**k) for k in ks])
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())

    def label(v, _):
        if v == 0:
            return "0"
        return f"{'−' if v < 0 else ''}$10^{{{int(round(np.log10(abs(v))))}}}$"

    axis.set_major_formatter(FuncFormatter(label))


def note(ax, text: str, loc: str = "upper left", **kw) -> None:
    """A small boxed annotation inside the axes — only where it covers no data (an empty
    panel, or a corner the caller has kept free)."""
    xy = {"upper left": (0.02, 0.98, "left", "top"), "upper right": (0.98, 0.98, "right", "top"),
          "lower left": (0.02, 0.02, "left", "bottom"), "lower right": (0.98, 0.02, "right", "bottom"),
          "center": (0.5, 0.5, "center", "center")}[loc]
    ax.text(xy[0], xy[1], text, transform=ax.transAxes, ha=xy[2], va=xy[3], fontsize=kw.pop("fontsize", MIN_FONT_PT),
            bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="0.7", alpha=0.9), **kw)


def wrap(text: str, width_in: float, fontsize: float = 8.5) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` pt (an average
    glyph is about half the font size wide); existing line breaks are kept."""
    import textwrap

    chars = max(20, int(width_in * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def fmt_num(x, digits: int = 3) -> str:
    """Compact number text: ``undefined`` for None/NaN, ``inf`` for infinities."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "undefined"
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def check_print_size(fig) -> None:
    """A figure must be 3.5 or 7.2 in wide, every visible text ≥ 7 pt and inside the figure
    (nothing clipped at the edge); ValueError naming the offending text otherwise."""
    width = float(fig.get_size_inches()[0])
    if not any(abs(width - w) < 1e-6 for w in (SINGLE, DOUBLE)):
        raise ValueError(f"figure is {width:g} in wide; print widths are {SINGLE} (single) and {DOUBLE} (double column)")
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()
             and not (t.axes is not None and not t.axes.get_visible())]
    small = sorted({round(t.get_fontsize(), 2) for t in texts if t.get_fontsize() < MIN_FONT_PT})
    if small:
        raise ValueError(f"text below {MIN_FONT_PT:g} pt in the figure: sizes {small}")
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    box = fig.bbox
    tol = 2.0  # pixels
    for t in texts:
        if getattr(t.axes, "name", "") == "3d":
            continue  # 3-D tick labels are placed by the projection, inside their axes
        bb = t.get_window_extent(renderer)
        if bb.x0 < box.x0 - tol or bb.x1 > box.x1 + tol or bb.y0 < box.y0 - tol or bb.y1 > box.y1 + tol:
            raise ValueError(f"text outside the figure (clipped): {t.get_text()[:60]!r}")


def save_figure(fig, data: pd.DataFrame, params: Mapping, root, name: str, kind: str = "figure",
                dataset: str | None = None, *, sink=atomic.write_bytes) -> list[str]:
    """Write ``fig`` in every configured format and ``data`` as CSV, atomically; close the figure.

    The figure is saved at its own size (:func:`check_print_size`: a print width, text ≥ 7 pt)
    to ``results/figures/{dataset}/``; for ``kind="table"`` there is no figure (``fig`` is
    ignored) and the CSV goes to ``results/tables/{dataset}/``. ``dataset`` defaults to the
    params' ``data.name`` (the cross-dataset outputs pass :func:`villani.plan.layout.across`).
    Each file's bytes go to ``sink(path, bytes)`` (default: written atomically;
    :func:`villani.figures.render_all` holds them until every figure rendered).
    """
    written = []
    dataset = params["data"]["name"] if dataset is None else dataset
    if kind == "figure":
        check_print_size(fig)
        folder = Path(layout.fmt(layout.FIGURES_DIR, root, dataset=dataset))
        for ext in params["figures"]["formats"]:
            path = folder / f"{name}.{ext}"
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=params["figures"]["dpi"])
            sink(path, buf.getvalue())
            written.append(str(path))
        plt.close(fig)
        csv_path = folder / f"{name}.csv"
    else:
        csv_path = Path(layout.fmt(layout.TABLES_DIR, root, dataset=dataset)) / f"{name}.csv"
    if data.empty:
        raise ValueError(f"{name}: nothing to write (no numbers behind the {kind})")
    sink(csv_path, data.to_csv(index=False).encode())
    written.append(str(csv_path))
    return written
