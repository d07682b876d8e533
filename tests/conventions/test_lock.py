"""requirements/lock.txt: the tested versions, within pyproject.toml's ranges, without
torch; the environment the tests run in is the locked one (`make install` uses it)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO


def _lock() -> dict[str, str]:
    pins = {}
    env = default_environment()
    for line in (REPO / "requirements" / "lock.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(env):
            (spec,) = req.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in ("workflow", "test", "slurm", "tensorboard") for r in project["optional-dependencies"][extra]]
    return [Requirement(r) for r in reqs]


def test_lock_pins_every_declared_dependency_within_its_range_except_torch():
    pins = _lock()
    assert "torch" not in pins and not any(n.startswith("nvidia-") for n in pins)
    for req in _declared():
        name = canonicalize_name(req.name)
        if name == "torch":
            continue
        assert name in pins, f"{name} is declared in pyproject.toml but not pinned in requirements/lock.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {req}"


def test_the_test_environment_is_the_locked_one():
    pins = _lock()
    wrong = {}
    for req in _declared():
        name = canonicalize_name(req.name)
        if name != "torch" and metadata.version(req.name) != pins[name]:
            wrong[name] = (metadata.version(req.name), pins[name])
    assert not wrong, f"installed vs locked (run `make install`): {wrong}"


def test_lock_command_in_makefile_is_the_one_in_the_lock_header():
    header = (REPO / "requirements" / "lock.txt").read_text().splitlines()[1]
    make = (REPO / "Makefile").read_text()
    cmd = re.search(r"\$\(BIN\)/uv (pip compile .*?)\$\(LOCK_ARGS\)", make.replace("\\\n\t\t", ""), re.S).group(1)
    assert " ".join(cmd.split()) in header, (cmd, header)
