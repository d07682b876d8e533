"""``python -m villani.cli …``: the ``villani`` command (what ``torchrun -m`` and the side-by-side
training's child processes start)."""

import sys

from villani.cli import main

if __name__ == "__main__":
    sys.exit(main())
