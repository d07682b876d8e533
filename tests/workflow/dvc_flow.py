"""The DVC flow of the documentation, driven as printed: its commands, and what both engines
say after each (``dvc status``, ``snakemake -n``). Shared by test_dvc.py and
test_dvc_agreement.py, which run on one ``make run`` (the ``dvc_repo`` fixture, conftest)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.workflow.conftest import BIN, run

# The DVC commands of the documentation's DVC page (docs/running/dvc.md; the README prints some of
# them), run below exactly as printed there.
README_COMMANDS = {
    "status": "dvc status",
    "repro": "dvc repro",
    "metrics_diff": "dvc metrics diff HEAD~1",
    "plots_diff": "dvc plots diff HEAD~1",
    "exp_run": "dvc exp run -S 'claims.confidence=0.9'",
    "exp_show": "dvc exp show --only-changed --drop '^(results|src)/'",
    "exp_back": "git checkout params.yaml dvc.lock && dvc checkout",
    "push": "dvc push",
    "pull": "dvc pull",
    "preset": "cp configs/ptb.yaml params.yaml && dvc repro --dry --force",
    "go_back": "git checkout HEAD~1 -- params.yaml dvc.lock && villani plan && dvc checkout",
}


def git(work, *args):
    return run(["git", *args], cwd=work)


def sh(cmd: str, work, check=True) -> subprocess.CompletedProcess:
    """A documented command line, through the shell as a user types it."""
    return run(["bash", "-c", cmd], cwd=work, check=check)


def dvc_status(work) -> dict:
    return json.loads(run([BIN / "dvc", "status", "--json"], cwd=work).stdout or "{}")


def stages_run(text: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", text))


def nothing_to_do(work) -> None:
    out = run([BIN / "snakemake", "-n", "--profile", "profiles/local"], cwd=work)
    assert "Nothing to be done" in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]


def dvc_name(rule: str, wildcards: dict) -> str:
    """The DVC stage of a Snakemake job (dvc.yaml's names: train@<λ>-<seed>, train_langevin@…, landscape@<λ>)."""
    from villani.plan.runs import variant_kind
    from villani.plan.stages import stage

    row = stage(rule)
    if row.per == "run":
        kind = variant_kind(wildcards["variant"])
        suffix = "" if wildcards["variant"] == "adamw" else f"_{kind}"
        return f"{rule}{suffix}@{wildcards['lam']}-{wildcards['seed']}"
    return f"{rule}@{wildcards['lam']}" if row.per == "lam" else rule


def snakemake_plan(work) -> set[str]:
    """The jobs `snakemake -n` would run, as DVC stage names."""
    out = run([BIN / "snakemake", "-n", "--profile", "profiles/local"], cwd=work)
    jobs = set()
    for rule, body in re.findall(r"^\s*(?:local)?rule (\w+):\n((?:\s+\w+: .*\n)+)", out.stdout + out.stderr, re.M):
        if rule == "all":
            continue
        m = re.search(r"wildcards: (.*)", body)
        wildcards = dict(kv.split("=", 1) for kv in m.group(1).split(", ")) if m else {}
        jobs.add(dvc_name(rule, wildcards))
    return jobs


def agree(work) -> None:
    """`dvc status` and `snakemake -n` both have nothing to do."""
    assert dvc_status(work) == {}
    nothing_to_do(work)


def printed_flow(page: Path) -> list[str]:
    """The command lines of a page's DVC block (README.md, docs/running/dvc.md), in their
    order, comments dropped."""
    text = page.read_text()
    start = text.index("```bash\n", text.index("After `make run`, and after each edit of `params.yaml`"))
    block = text[start + len("```bash\n"):text.index("```", start + 3)]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
