"""`dvc repro --dry` on a fresh clone: DVC 3.67 stops at the first stage whose input another
stage has yet to write (DVC issue #9021).

Before it prints a changed stage's command, ``dvc.stage.run.run_stage`` asks the run cache
whether the stage can be restored, and ``dvc.stage.cache._can_hash`` hashes every
dependency to answer — a dependency that does not exist yet raises ``FileNotFoundError``,
and the dry run ends with ``failed to reproduce 'pretrained': [Errno 2] No such file``.
A stage whose input does not exist cannot be restored from the run cache, so the answer
there is "no": :func:`patch` makes ``_can_hash`` say so before it hashes, and DVC goes on
to print the command (a real ``dvc repro`` reaches a stage only after its inputs were
written, so nothing else changes).

``make install`` writes a ``.pth`` file (:data:`PTH`) that calls :func:`install` at the
start of the virtual environment's Python: an import hook that patches
``dvc.stage.cache`` when DVC imports it, nothing else is imported at start-up.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import sysconfig
from pathlib import Path

TARGET = "dvc.stage.cache"
PTH = "villani_dvc_dry_run.pth"


def patch(module) -> None:
    """Wrap ``module._can_hash``: False for a stage with a local dependency that does not exist."""
    original = module._can_hash
    if getattr(original, "_villani_missing_deps", False):
        return

    def _can_hash(stage):
        if any(dep.protocol == "local" and dep.def_path and not dep.exists for dep in stage.deps):
            return False
        return original(stage)

    _can_hash._villani_missing_deps = True
    module._can_hash = _can_hash


class _Hook(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``dvc.stage.cache`` through the other finders, runs it, then :func:`patch`."""

    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        patch(module)


def install() -> None:
    """Patch DVC's run-cache check now if DVC is loaded, else when it is imported."""
    if TARGET in sys.modules:
        patch(sys.modules[TARGET])
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())


def write_pth(site_packages: str | None = None) -> Path:
    """Write :data:`PTH` into the environment's site-packages; return its path."""
    path = Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH
    path.write_text("import villani.dag.dvc_dry_run as m; m.install()\n")
    return path


if __name__ == "__main__":
    print(f"wrote {write_pth()}")
