"""Checks that a page a researcher opens is drawn completely, shared by the browser tests:
the offline DVC plots page (villani.report.dvc_page) and the Snakemake report."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import REPO
from tests.report.browser import Browser, chromium_path
from villani.report.dvc_page import PageError, build_page

# a blank page has (near) zero variance; a drawn one has text, axes and marks
MIN_PIXEL_STD = 8.0
MIN_INK_FRACTION = 0.005
# a plot holds drawn marks: this many coloured pixels (max − min channel > 60; axes, grid
# and text are grey) in its canvas, or this many drawn SVG shapes
MIN_COLOURED_PIXELS = 200

# per Vega plot: [kind, coloured pixels or shapes] (canvas pixels are read in the page)
MARKS_JS = """
Array.from(document.querySelectorAll('.vega-embed')).map(el => {
  const c = el.querySelector('canvas');
  if (c) {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      const mx = Math.max(d[i], d[i+1], d[i+2]), mn = Math.min(d[i], d[i+1], d[i+2]);
      if (d[i+3] > 0 && mx - mn > 60) n++;
    }
    return ['canvas', n];
  }
  const s = el.querySelector('svg');
  return s ? ['svg', s.querySelectorAll('path[d], circle, rect, line').length] : ['none', 0];
})
"""


def browser() -> Browser:
    """A headless Chromium, or skip where the Debian package is not installed."""
    exe = chromium_path()
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return Browser(exe)


def install_plots_page(repo: Path) -> Path:
    """Write the offline page where ``repo``'s .dvc/config points (vega/page.html), from the
    npm packages `make install` put in this checkout's vega/node_modules."""
    out = repo / "vega/page.html"
    out.parent.mkdir(exist_ok=True)
    try:
        return build_page(REPO / "vega", out)
    except PageError as e:
        raise AssertionError(f"{e} — the offline DVC plots page is built by `make install`") from None


def dvc_plots_show(repo: Path, run) -> Path:
    """``dvc plots show`` as the README runs it; the page it prints."""
    out = run(["dvc", "plots", "show"], cwd=repo).stdout.strip().splitlines()[-1]
    assert out.startswith("file://"), out
    return Path(out.removeprefix("file://"))


def assert_not_blank(png: Path) -> None:
    """The screenshot varies (std of grey levels) and has ink (pixels darker than the paper)."""
    grey = np.asarray(Image.open(png).convert("L"), dtype=float)
    ink = float((grey < 200).mean())
    assert grey.std() > MIN_PIXEL_STD and ink > MIN_INK_FRACTION, (
        f"{png}: looks blank (std {grey.std():.1f}, ink fraction {ink:.4f})")


def assert_clean(b: Browser, what: str) -> None:
    """No console error or exception, and no request that would need the network."""
    assert not b.log.requests, f"{what} tried to reach the network: {b.log.requests}"
    assert not b.log.errors, f"{what}: {b.log.errors}"


def check_vega_page(b: Browser, page: Path, plots: int, shot: Path, timeout: float = 30) -> list:
    """Open a DVC plots page offline: ``plots`` Vega views, each with drawn marks; returns
    [kind, coloured pixels or shapes] per view."""
    b.open(page)
    drawn = lambda m: m[0] != "none" and m[1] >= (MIN_COLOURED_PIXELS if m[0] == "canvas" else 1)
    end = time.monotonic() + timeout
    while not (len(marks := b.evaluate(MARKS_JS)) == plots and all(map(drawn, marks))):
        assert time.monotonic() < end, f"{page}: Vega views {marks}, expected {plots} with marks; {b.log}"
        time.sleep(0.3)
    assert_not_blank(b.screenshot(shot))
    assert_clean(b, str(page))
    return marks
