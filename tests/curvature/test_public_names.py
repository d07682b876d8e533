"""``villani.curvature``'s public names: each from the module of the folder it belongs to,
imported on first use (so a module of the engine can be imported without torch)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import villani.curvature as C


def test_every_public_name_comes_from_its_module():
    for name, home in C.HOMES.items():
        module = importlib.import_module(home, "villani.curvature")
        assert name in module.__all__, (name, home)
        assert getattr(C, name) is getattr(module, name)
    assert sorted(C.__all__) == sorted(C.HOMES) and set(C.__all__) <= set(dir(C))


def test_a_module_of_the_engine_imports_without_torch():
    code = ("import sys; import villani.curvature.spectrum.density as d; print('torch' in sys.modules, "
            "d.slq_num_starts(1000, 0.01)); from villani.curvature import hutchinson; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "20", "True"], out
