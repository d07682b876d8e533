"""Sphinx configuration of villani's documentation site (built by `make docs`, warnings as errors).

Sphinx with MyST (Markdown pages) and the PyData theme — what NumPy, SciPy, pandas and
Matplotlib use, and what curvlinops and Snakemake's own docs are built with: the reference
is generated from the code (the parameter schema and the CLI parser by `villani docs`, the
Python API by autodoc/autosummary from the docstrings). The build needs no network.
"""

project = "villani"
author = "the villani developers"
copyright = "2026, the villani developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 4
autosummary_generate = True
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
html_theme = "pydata_sphinx_theme"
html_title = "villani"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = ["_static"]
html_css_files = ["villani.css"]
