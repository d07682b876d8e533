# villani — two commands: `make run` (the whole workflow on the embedded default) and
# `make test` (the test suite). Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.villani-installed
# Two workers; a test file stays on one worker so its module fixtures (a whole workflow
# run) are built once. Slowest tests are listed at the end.
PYTEST_ARGS ?= -n 2 --dist loadfile --durations=15

.PHONY: install run test dryrun clean-results

install: $(STAMP)

# torch first: a torch already in the venv (e.g. the user's CUDA build) is kept and pinned
# as installed; otherwise the tested CPU build from requirements/torch.txt. Then the rest,
# constrained so nothing can pull another torch.
$(STAMP): pyproject.toml requirements/torch.txt requirements/pins.txt requirements/oracle.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q -r requirements/torch.txt
	$(BIN)/python -c "import torch; print('torch==' + torch.__version__)" > $(VENV)/constraints.txt
	grep -v '^torch==' requirements/pins.txt | grep -v '^#' >> $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[test,slurm,tensorboard]"
	$(BIN)/python -m pip install -q --no-deps -r requirements/oracle.txt
	touch $(STAMP)

run: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --profile profiles/local

dryrun: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --profile profiles/local -n

test: install
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

clean-results:
	rm -rf results .snakemake
