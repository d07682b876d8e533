"""The HTML page of ``dvc plots show`` / ``dvc plots diff`` that draws offline.

DVC's own page loads Vega, Vega-Lite and Vega-Embed from a CDN (``<script src=
"https://cdn.jsdelivr.net/npm/vega@…">``), so on a compute node without internet it stays
blank. DVC fills the page into an HTML template (``plots.html_template`` in ``.dvc/config``,
or ``--html-template``) by replacing ``{plot_divs}`` (the plots), ``{scripts}`` (the CDN
``<script>`` tags) and ``{refresh_tag}``. The template written here has no ``{scripts}``,
and carries the three libraries inline instead, as installed from the npm registry at the
versions pinned in ``vega/package.json`` / ``vega/package-lock.json`` (``make install``
runs ``npm ci`` there and then this module)::

    python -m villani.report.dvc_page [--node-modules vega/node_modules] [--out vega/page.html]

Each library comes with its name, version and licence (its LICENSE file where the package
has one) in a comment before its code.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# load order: Vega-Lite compiles to Vega; Vega-Embed needs both
LIBRARIES = {
    "vega": "build/vega.min.js",
    "vega-lite": "build/vega-lite.min.js",
    "vega-embed": "build/vega-embed.min.js",
}
PLACEHOLDERS = ("{plot_divs}", "{scripts}", "{refresh_tag}")  # what DVC's HTML.embed replaces
PACKAGE_DIR = Path("vega")  # package.json, package-lock.json, node_modules/, page.html

PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
{refresh_tag}
<title>DVC plots (villani)</title>
<style>
  body {{ font-family: sans-serif; margin: 1.5em; }}
  body > div {{ margin-bottom: 2em; }}
  table {{ border-spacing: 15px; }}
  .vega-embed {{ display: block; }}
  footer {{ color: #666; font-size: 0.8em; }}
</style>
{libraries}
</head>
<body>
{plot_divs}
<footer>Drawn offline: {versions} inlined in this page (villani.report.dvc_page).</footer>
</body>
</html>
"""


class PageError(ValueError):
    """The installed libraries cannot make the page (missing, another version, unsafe text)."""


def pinned_versions(package_json: Path) -> dict[str, str]:
    """The exact versions ``package.json`` pins for each of :data:`LIBRARIES`."""
    deps = json.loads(package_json.read_text())["dependencies"]
    missing = [name for name in LIBRARIES if name not in deps]
    if missing:
        raise PageError(f"{package_json}: dependencies lack {', '.join(missing)} (needed: {', '.join(LIBRARIES)})")
    loose = {n: deps[n] for n in LIBRARIES if not re.fullmatch(r"\d+\.\d+\.\d+", deps[n])}
    if loose:
        raise PageError(f"{package_json}: {loose} is not an exact version (allowed: X.Y.Z)")
    return {name: deps[name] for name in LIBRARIES}


def library_script(node_modules: Path, name: str, version: str) -> str:
    """One ``<script>`` element holding library ``name`` at ``version``, its licence first."""
    pkg_dir = node_modules / name
    if not (pkg_dir / "package.json").is_file():
        raise PageError(f"{pkg_dir}: not installed (run `make install`, or `npm ci --prefix {node_modules.parent}`)")
    meta = json.loads((pkg_dir / "package.json").read_text())
    if meta["version"] != version:
        raise PageError(f"{pkg_dir}: version {meta['version']} is installed, {version} is pinned "
                        f"(run `make install`, or `npm ci --prefix {node_modules.parent}`)")
    code = (pkg_dir / LIBRARIES[name]).read_text(encoding="utf-8")
    code = re.sub(r"^//# sourceMappingURL=.*$", "", code, flags=re.M).strip()  # the maps are not inlined
    for unsafe in ("</script", "<!--", *PLACEHOLDERS):
        if unsafe in code.lower():
            raise PageError(f"{pkg_dir / LIBRARIES[name]}: contains {unsafe!r}, which would break the inlined page")
    licence = next((f for f in ("LICENSE", "LICENSE.md", "LICENSE.txt") if (pkg_dir / f).is_file()), None)
    text = (pkg_dir / licence).read_text(encoding="utf-8").strip() if licence else ""
    repo = meta.get("repository")
    home = meta.get("homepage") or (repo.get("url") if isinstance(repo, dict) else repo) or ""
    home = home if "://" in home or not home else f"https://github.com/{home}"
    header = (f"{name} {version} ({home}), licence {meta.get('license', 'unknown')}"
              + (f":\n{text}" if text else ""))
    return f"<script>\n/*! {header.replace('*/', '* /')} */\n{code}\n</script>"


def render_page(node_modules: Path, versions: dict[str, str]) -> str:
    """The template text: DVC's placeholders ``{plot_divs}``, ``{refresh_tag}``, the libraries inline."""
    scripts = "\n".join(library_script(node_modules, n, v) for n, v in versions.items())
    names = {"vega": "Vega", "vega-lite": "Vega-Lite", "vega-embed": "Vega-Embed"}
    summary = ", ".join(f"{names[n]} {v}" for n, v in versions.items())
    # format() turns {{ }} into braces and keeps DVC's placeholders for DVC to fill
    return PAGE.format(refresh_tag="{refresh_tag}", plot_divs="{plot_divs}", libraries=scripts, versions=summary)


def build_page(package_dir: Path = PACKAGE_DIR, out: Path | None = None) -> Path:
    """Write ``package_dir/page.html`` (or ``out``) from ``package_dir/node_modules``."""
    out = out or package_dir / "page.html"
    page = render_page(package_dir / "node_modules", pinned_versions(package_dir / "package.json"))
    tmp = out.with_suffix(".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m villani.report.dvc_page", description=__doc__.split("\n")[0])
    ap.add_argument("--package-dir", type=Path, default=PACKAGE_DIR,
                    help="folder with package.json and node_modules/ (default: vega)")
    ap.add_argument("--out", type=Path, default=None, help="the template to write (default: <package-dir>/page.html)")
    args = ap.parse_args(argv)
    try:
        out = build_page(args.package_dir, args.out)
    except (PageError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"villani.report.dvc_page: {e}", file=sys.stderr)
        return 1
    print(f"wrote {out} (the HTML template of `dvc plots show`, .dvc/config plots.html_template)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
