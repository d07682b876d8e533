"""Install the project's Snakemake profile under a name Snakemake finds.

``snakemake --profile NAME`` looks for ``NAME/`` in the working directory, then in the
user's and the site's Snakemake config folders (platformdirs' ``user_config_dir`` —
``~/.config/snakemake`` on Linux, ``$XDG_CONFIG_HOME/snakemake`` when set). The repository's
profiles live under ``profiles/``, so ``--profile slurm`` finds nothing there;
:func:`install_profile` copies one into the user's folder. It never replaces a profile the
user already has: when ``NAME`` is taken it uses ``NAME-villani``, ``NAME-villani-2``, …
and says which. The ``USER:`` lines (commented site settings) are filled from the
options given: ``--account`` (sbatch -A, every rule) and ``--partition`` (sbatch -p, every
rule); the rest stay commented. ``--gpu-partition`` (sbatch -p of the GPU rules) adds a
``set-resources`` entry for each GPU stage of the stage table (:func:`gpu_partition_resources`): the
profile itself holds only what every rule shares.
"""

from __future__ import annotations

import re
from pathlib import Path

from villani.io import atomic


def user_profile_dir() -> Path:
    """Where Snakemake looks up profile names for this user (its own platformdirs call)."""
    from platformdirs import AppDirs

    return Path(AppDirs("snakemake", "snakemake").user_config_dir)


def _slurm_name(key: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.,@+-]+", value):
        raise ValueError(f"{key}: {value!r} is not a SLURM name (letters, digits, _ . , @ + -)")
    return value


def fill_user_lines(text: str, account: str | None = None, partition: str | None = None) -> str:
    """Uncomment and fill the ``# slurm_account: …  # USER`` / ``# slurm_partition: …  # USER``
    lines of a profile."""
    values = {"<account>": account, "<cpu-partition>": partition}
    line_re = re.compile(r'^(?P<indent>\s*)#\s*(?P<key>slurm_account|slurm_partition):\s*"(?P<slot><[a-z-]+>)"'
                         r'(?P<gap>\s*)#\s*USER\b(?P<rest>.*)$')

    def fill(m: re.Match) -> str:
        value = values.get(m["slot"])
        if value is None:
            return m[0]
        value = _slurm_name(m["key"], value)
        return f'{m["indent"]}{m["key"]}: "{value}"{m["gap"]}# USER (villani profile install){m["rest"]}'

    return "\n".join(line_re.sub(fill, line) for line in text.split("\n"))


def gpu_partition_resources(partition: str) -> str:
    """``set-resources:`` giving every GPU stage (a row with ``gpu``,
    :data:`villani.plan.stages.TABLE`) the partition ``partition``; each rule's other
    resources stay its row's (set-resources replaces key by key)."""
    from villani.plan.stages import TABLE

    partition = _slurm_name("--gpu-partition", partition)
    rows = "".join(f'  {row.name}:\n    slurm_partition: "{partition}"\n' for row in TABLE if row.gpu)
    return ("\n# the GPU stages' partition (villani profile install --gpu-partition, from the stage table)\n"
            "set-resources:\n" + rows)


def free_name(base: Path, name: str) -> str:
    """``name`` if ``base/name`` does not exist, else the first free ``name-villani[-k]``."""
    if not (base / name).exists():
        return name
    k = 1
    while True:
        candidate = f"{name}-villani" + (f"-{k}" if k > 1 else "")
        if not (base / candidate).exists():
            return candidate
        k += 1


def install_profile(source: str | Path, name: str, *, account: str | None = None, partition: str | None = None,
                    gpu_partition: str | None = None, config_dir: str | Path | None = None) -> tuple[str, Path]:
    """Copy profile folder ``source`` to ``<config_dir>/<name>`` (never over an existing one),
    filling its USER lines; return the name used and the written config file."""
    source = Path(source)
    src = source / "config.yaml"
    if not src.is_file():
        raise ValueError(f"{src}: profile not found (run from the repository root, or pass --source DIR)")
    base = Path(config_dir) if config_dir else user_profile_dir()
    used = free_name(base, name)
    text = fill_user_lines(src.read_text(), account=account, partition=partition)
    if gpu_partition:
        text = text.rstrip("\n") + "\n" + gpu_partition_resources(gpu_partition)
    target = base / used / "config.yaml"
    atomic.write_text(target, text)
    return used, target
