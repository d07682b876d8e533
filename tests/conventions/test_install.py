"""`make install` prints no "Failed to initialize NumPy" (issue 45 item 8): torch is installed
first and pinned as installed before numpy is; importing torch then, without numpy, prints
that warning. The pin is read from torch's package metadata instead."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

from tests.conftest import REPO


def test_the_torch_pin_is_read_without_importing_torch(tmp_path):
    make = (REPO / "Makefile").read_text()
    (line,) = [x.strip() for x in make.splitlines() if "constraints.txt" in x and "torch==" in x]
    cmd = line.split(" > ")[0].replace("$(BIN)/python", sys.executable)
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['numpy'] = None  # as before numpy is installed\n")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.strip() == f"torch=={metadata.version('torch')}"
