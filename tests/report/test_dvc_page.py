"""The offline page of ``dvc plots show`` (villani.report.dvc_page, .dvc/config
plots.html_template): built from the pinned npm packages, drawn by Chromium without network,
while DVC's own CDN page stays blank there. The plots of a whole workflow run are checked in
tests/workflow/test_snakemake.py::test_dvc_plots_and_the_report_render_offline."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO
from tests.report import pages
from tests.workflow.conftest import git_repo, run
from villani.report.dvc_page import LIBRARIES, PageError, build_page, pinned_versions


def test_the_page_carries_the_pinned_libraries_and_no_cdn(tmp_path):
    page = pages.install_plots_page(tmp_path).read_text()
    pins = pinned_versions(REPO / "vega/package.json")
    lock = json.loads((REPO / "vega/package-lock.json").read_text())["packages"]
    for name, version in pins.items():
        assert lock[f"node_modules/{name}"]["version"] == version  # npm ci installs what package.json pins
        assert f"/*! {name} {version} (" in page
    assert page.count("{plot_divs}") == 1 and "{refresh_tag}" in page
    assert "{scripts}" not in page and "<script src" not in page and "cdn.jsdelivr" not in page


def test_a_stale_install_is_refused_in_one_line_naming_the_package(tmp_path):
    shutil.copy(REPO / "vega/package.json", tmp_path / "package.json")
    for name in LIBRARIES:
        (tmp_path / "node_modules" / name).mkdir(parents=True)
        (tmp_path / "node_modules" / name / "package.json").write_text(json.dumps({"version": "5.0.0"}))
    stale = r"node_modules/vega: version 5.0.0 is installed, \S+ is pinned \(run `make install`"
    with pytest.raises(PageError, match=stale):
        build_page(tmp_path)
    assert not (tmp_path / "page.html").exists()


def loss_csv(shift: float) -> str:
    """Two runs' training losses in the columns of results/plots/<dataset>/training_loss.csv."""
    rows = ["step,loss,variant,lam,seed,run,group"] + [
        f"{s},{3 - s / (4 + lam) + shift},adamw,{lam},0,adamw λ={lam} seed 0,adamw λ={lam}"
        for lam in (0.0, 1.0) for s in range(1, 9)]
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def loss_repo(tmp_path_factory):
    """A DVC repository with one plot (two runs' losses, DVC's stock line template)."""
    work = tmp_path_factory.mktemp("dvc-page")
    (work / "loss.csv").write_text(loss_csv(shift=0.0))
    (work / "dvc.yaml").write_text("plots:\n  - loss.csv:\n      x: step\n      y: loss\n")  # DVC's own template
    git_repo(work)
    run(["dvc", "init", "-q"], cwd=work)
    return work


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_dvc_plots_show_and_diff_draw_offline_through_the_configured_template(loss_repo, tmp_path):
    shutil.copy(REPO / ".dvc/config", loss_repo / ".dvc/config")
    pages.install_plots_page(loss_repo)
    show = pages.dvc_plots_show(loss_repo, run)
    with pages.browser() as b:
        marks = pages.check_vega_page(b, show, plots=1, shot=tmp_path / "dvc-plots.png")
        assert marks[0][0] == "canvas"
        # the workspace against the committed revision: the same page, both revisions drawn
        (loss_repo / "loss.csv").write_text(loss_csv(shift=0.5))
        try:
            diff = pages.dvc_plots_show(loss_repo, run, "diff", "HEAD")
            (kind, coloured), = pages.check_vega_page(b, diff, 1, tmp_path / "dvc-plots-diff.png")
        finally:
            (loss_repo / "loss.csv").write_text(loss_csv(shift=0.0))
    assert kind == "canvas" and coloured > marks[0][1]  # more lines drawn: two revisions


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_dvc_s_own_cdn_page_stays_blank_offline(loss_repo, tmp_path):
    """The failure the offline page fixes, as these checks see it."""
    (loss_repo / ".dvc/config").write_text("[core]\n    autostage = false\n")
    (loss_repo / ".dvc/config.local").unlink(missing_ok=True)  # no template: DVC's own page
    page = pages.dvc_plots_show(loss_repo, run)
    with pages.browser() as b:
        with pytest.raises(AssertionError, match="Vega views"):
            pages.check_vega_page(b, page, plots=1, shot=tmp_path / "cdn.png", timeout=3)
        assert any("cdn.jsdelivr.net/npm/vega" in url for url in b.log.requests), b.log
        assert any("vegaEmbed is not defined" in e for e in b.log.errors), b.log
