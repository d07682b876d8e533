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

# a blank page has (near) zero variance; a drawn one has text, axes and marks. Measured at
# 1280 px wide: the offline page with no plot (its footer line only) std 4.8, ink 0.0016;
# one 300 × 300 DVC line plot std 10.0, ink 0.0047; DVC's CDN page offline std 0, ink 0.
MIN_PIXEL_STD = 8.0
MIN_INK_FRACTION = 0.003
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


def chromium_or_skip() -> str:
    """The Chromium executable; the test is skipped where the Debian package is not installed."""
    exe = chromium_path()
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return exe


def browser() -> Browser:
    """A headless Chromium, or skip where the Debian package is not installed."""
    return Browser(chromium_or_skip())


def install_plots_page(repo: Path) -> Path:
    """Write the offline page where ``repo``'s .dvc/config points (vega/page.html), from the
    npm packages `make install` put in this checkout's vega/node_modules."""
    out = repo / "vega/page.html"
    out.parent.mkdir(exist_ok=True)
    (repo / ".dvc").mkdir(exist_ok=True)
    (repo / ".dvc" / "config.local").write_text("[plots]\n    html_template = ../vega/page.html\n")  # as make install
    try:
        return build_page(REPO / "vega", out)
    except PageError as e:
        raise AssertionError(f"{e} — the offline DVC plots page is built by `make install`") from None


def dvc_plots_show(repo: Path, run, *command: str) -> Path:
    """``dvc plots show`` (or ``dvc plots <command…>``, e.g. ``diff HEAD``) as docs/running/dvc.md
    prints it; the page it prints."""
    out = run(["dvc", "plots", *(command or ["show"])], cwd=repo).stdout.strip().splitlines()[-1]
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


def wait_for_marks(b: Browser, views: int, what: str, timeout: float = 30) -> list:
    """Poll until ``views`` Vega views are in the page, each with drawn marks."""
    drawn = lambda m: m[0] != "none" and m[1] >= (MIN_COLOURED_PIXELS if m[0] == "canvas" else 1)
    end = time.monotonic() + timeout
    while not (len(marks := b.evaluate(MARKS_JS)) == views and all(map(drawn, marks))):
        assert time.monotonic() < end, f"{what}: Vega views {marks}, expected {views} with marks; {b.log}"
        time.sleep(0.3)
    return marks


def check_vega_page(b: Browser, page: Path, plots: int, shot: Path, timeout: float = 30) -> list:
    """Open a DVC plots page offline: ``plots`` Vega views, each with drawn marks; returns
    [kind, coloured pixels or shapes] per view."""
    b.open(page)
    marks = wait_for_marks(b, plots, str(page), timeout)
    assert_not_blank(b.screenshot(shot))
    assert_clean(b, str(page))
    return marks


# every image result of the report, shown one after the other: [path, natural width, height]
REPORT_IMAGES_JS = """
(async () => {
  const out = [];
  for (const [path, r] of Object.entries(results)) {
    if (!(r.mime_type || '').startsWith('image/')) continue;
    app.setView({content: 'img', contentPath: r.data_uri, resultPath: path});
    let img;
    for (let i = 0; i < 100; i++) {
      await new Promise(res => setTimeout(res, 50));
      img = Array.from(document.images).find(i => i.src === r.data_uri);
      if (img && img.complete) break;
    }
    out.push([path, img ? img.naturalWidth : -1, img ? img.naturalHeight : -1]);
  }
  return out;
})()
"""


def check_report(b: Browser, report: Path, shots: Path, description: str) -> list:
    """Open a Snakemake report offline: the description (containing ``description``) beside
    the drawn rule graph, the statistics' two drawn plots, and every image result decoded;
    screenshots of the three views in ``shots``. Returns [path, width, height] per image."""
    b.open(report)
    b.wait_for(f"(document.querySelector('.prose') || {{}}).innerText?.includes({description!r})")
    prose = b.evaluate("document.querySelector('.prose').innerText")
    assert "System Message" not in prose, f"{report}: the description is not valid reStructuredText: {prose}"
    wait_for_marks(b, 1, f"{report}: rule graph")
    assert_not_blank(b.screenshot(shots / "report-workflow.png"))
    b.evaluate("app.setView({content: 'stats'})")
    wait_for_marks(b, 2, f"{report}: statistics (runtimes, timeline)")
    assert_not_blank(b.screenshot(shots / "report-statistics.png"))
    images = b.evaluate(REPORT_IMAGES_JS)
    assert images and all(w > 0 and h > 0 for _, w, h in images), f"{report}: images not drawn: {images}"
    assert_not_blank(b.screenshot(shots / "report-last-figure.png"))
    assert_clean(b, str(report))
    return images
