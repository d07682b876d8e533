#!/usr/bin/env bash
# Run by Snakemake inside the new conda environment, from the working directory (the
# repository root): torch first (requirements/torch.txt), then villani with the locked
# versions -- the same steps as `make install`.
set -euo pipefail
python -m pip install -r requirements/torch.txt
python -c "import torch; print('torch==' + torch.__version__)" > "$CONDA_PREFIX/villani-constraints.txt"
python -m pip install -c "$CONDA_PREFIX/villani-constraints.txt" -c requirements/lock.txt .
