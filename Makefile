# villani — two commands: `make run` (the whole workflow on the embedded default) and
# `make test` (the test suite). Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.villani-installed
# the HTML template of `dvc plots show`, Vega inline (set for this clone in .dvc/config.local)
PLOTS_PAGE := vega/page.html
# Two workers; a test file stays on one worker so its module fixtures (a whole workflow
# run) are built once. Slowest tests are listed at the end.
PYTEST_ARGS ?= -n 2 --dist loadfile --durations=15

.PHONY: install run test test-fast docs dryrun lint lock profile clean-results

install: $(STAMP) $(PLOTS_PAGE)

# torch first: a torch already in the venv (e.g. the user's CUDA build) is kept and pinned
# as installed; otherwise the tested CPU build from requirements/torch.txt. Then the rest
# at the tested versions of requirements/lock.txt (`make lock` refreshes it), constrained
# so nothing can pull another torch. The pin is read from torch's package metadata: importing
# torch before numpy is installed prints "Failed to initialize NumPy".
$(STAMP): pyproject.toml requirements/torch.txt requirements/lock.txt requirements/oracle.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q -r requirements/torch.txt
	$(BIN)/python -c "from importlib.metadata import version; print('torch==' + version('torch'))" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -c requirements/lock.txt -e ".[workflow,test,slurm,tensorboard,docs]"
	$(BIN)/python -m pip install -q --no-deps -r requirements/oracle.txt
	rm -f $(VENV)/lib/python*/site-packages/villani_dvc_dry_run.pth   # a start-up hook older versions installed
	touch $(STAMP)

# Vega, Vega-Lite, Vega-Embed from the npm registry at the versions of vega/package-lock.json
# (no install scripts run), inlined into the page so that `dvc plots show` draws offline.
# Without npm the workflow still installs and runs; `dvc plots show` then writes DVC's own
# page, which loads Vega from a CDN (it draws with internet only).
$(PLOTS_PAGE): vega/package.json vega/package-lock.json src/villani/report/dvc_page.py $(STAMP)
	@if ! command -v npm >/dev/null; then \
		echo "make install: npm not found: $(PLOTS_PAGE), the page of 'dvc plots show' that draws offline, is not built (install Node.js and npm, e.g. apt-get install nodejs npm, then make install)" >&2; \
	else \
		npm ci --prefix vega --ignore-scripts --no-audit --no-fund --loglevel=error && \
		$(BIN)/python -m villani.report.dvc_page --package-dir vega && \
		$(BIN)/dvc config --local plots.html_template ../$(PLOTS_PAGE); \
	fi

# Re-resolve the lock from pyproject.toml's ranges (newest versions that fit, preferring
# the current pins); then `make install test` and commit requirements/lock.txt.
lock:
	test -x $(BIN)/uv || $(BIN)/python -m pip install -q uv
	$(BIN)/uv pip compile pyproject.toml --extra workflow --extra test --extra slurm --extra tensorboard --extra docs --override requirements/lock-overrides.txt \
		--no-emit-package torch --universal --python-version 3.11 -o requirements/lock.txt $(LOCK_ARGS)

# The SLURM profile under a name `snakemake --profile` finds: make profile ARGS="--account X"
profile: install
	$(BIN)/villani profile install $(ARGS)

# One run at a time; after a killed run, the next one removes Snakemake's stale lock itself
# (villani.dag.run_lock). --brief: the plan, progress, errors and the summary at the terminal
# (villani.dag.run_output); each job's inputs and outputs stay in .snakemake/log/.
run: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/villani run-lock --brief -- $(BIN)/snakemake --profile profiles/local

dryrun: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --profile profiles/local -n

# Snakemake's own checks of the workflow files, and that dvc.yaml is generated from the
# stage table and every key it reads is in the shipped parameter files (also run by the test suite)
lint: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint
	$(BIN)/snakefmt --check Snakefile workflow
	for f in params.yaml configs/ptb.yaml configs/wikitext103.yaml; do $(BIN)/villani dvc-yaml --check --params $$f || exit 1; done

test: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

# The edit–test loop: every test but the whole-workflow (slow), SLURM and oracle ones
# (pyproject.toml's markers); `make test` stays the full suite CI runs
test-fast: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS) -m "not slow and not slurm and not oracle"

# The documentation site: the generated reference pages checked current (`villani docs`
# rewrites them), then Sphinx with warnings as errors, no network; open docs/_build/html/index.html
docs: install
	$(BIN)/villani docs --check
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

clean-results:
	rm -rf results .snakemake
