"""The documentation site: its generated pages are current, it builds with warnings as errors, and
the README stays a page a newcomer finishes (≤ 250 lines) whose stage table is the stage table's."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from villani.cli import build_parser, reference

ROOT = Path(__file__).resolve().parents[2]


def test_generated_pages_are_current():
    assert reference.stale_pages(build_parser(), ROOT) == [], "run `villani docs` to regenerate them"


@pytest.mark.slow  # 9 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_check_names_a_stale_page(tmp_path):
    for page in [*reference.PAGES, *reference.MARKED()]:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    (tmp_path / "docs/reference/cli.md").write_text("# Command line\n\nedited by hand\n")
    assert reference.stale_pages(build_parser(), tmp_path) == ["docs/reference/cli.md"]
    out = subprocess.run([sys.executable, "-m", "villani.cli", "docs", "--check"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 2 and "docs/reference/cli.md" in out.stderr and "villani docs" in out.stderr
    fixed = subprocess.run([sys.executable, "-m", "villani.cli", "docs"], cwd=tmp_path, capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr
    assert reference.stale_pages(build_parser(), tmp_path) == []


def test_the_readme_is_short_and_lists_every_stage():
    from villani.plan.stages import STAGES

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250, "README.md: over 250 lines; move reference material into docs/"
    for page, text in (("README.md", readme), ("docs/what-is-measured.md",
                                                (ROOT / "docs" / "what-is-measured.md").read_text(encoding="utf-8"))):
        rows = [line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")]
        assert [r for r in rows if r in STAGES] == list(STAGES), f"{page}: the stage table is not plan/stages.py's"


def test_every_parameter_and_command_is_documented():
    from villani.plan.params_file import load_schema

    params, cli = reference.parameters_markdown(), reference.cli_markdown(build_parser())
    for group, sub in load_schema()["properties"].items():
        for key in sub.get("properties", {}):
            assert f"`{group}.{key}`" in params
    commands = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for name in commands.choices:
        assert f"## `villani {name}`" in cli


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(ROOT / "docs"),
                          str(tmp_path / "html")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]
    assert (tmp_path / "html" / "reference" / "parameters.html").is_file()
