"""The links of the provenance chain a reader checks before it computes from a record.

    parameters ← segment manifest ← checkpoint ← measure JSON ← bounds.json ← claims ledger

Each record names the sha256 of what it was computed from; the training side checks the
first links (:mod:`villani.training.segments`, :mod:`villani.training.checkpoint`), the
readers of :mod:`villani.io.results` the rest, here:

- :func:`check_measure_links` — a measure JSON's ``weights_sha256`` and
  ``checkpoint_meta_sha256`` are those of the run's ``checkpoint.json`` now (not measured on
  other weights, not a checkpoint retrained since), its ``train_digest`` the run digest the
  parameters give (:func:`villani.plan.digest.run_digest`: the run was not retrained under
  edited parameters without being measured again), its ``measure_digest`` that of the
  measure keys;
- :func:`check_inputs` — the measure JSONs (by ``record_sha256``) a ``bounds.json`` or a
  claims ledger names are exactly those under the results root now, and the ledger's
  ``bounds.json`` the one there now.

Each failure is one line naming the file, what differs and the command that makes it
current — never a number computed from a record that cannot prove its inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from villani.io import atomic
from villani.plan.digest import params_difference, run_digest, stage_digest, stage_inputs, trained_params
from villani.plan.runs import Run
from villani.plan.writers import command

__all__ = ["check_measure_links", "check_inputs"]


def _again(path) -> str:
    """Measure the checkpoint of measure JSON ``path`` again: its command (the workflow does
    not redo a measurement whose file is there)."""
    return f"measure it again: `{command(path)}`"



def check_measure_links(rec: Mapping, path, params: Mapping, run: Run, meta: Mapping | None, meta_path: Path) -> None:
    """One-line ValueError unless the measure JSON ``rec`` (read from ``path``) was measured on
    the checkpoint whose ``checkpoint.json`` (``meta``, None when missing) is at ``meta_path``,
    trained and measured under ``params`` (module doc)."""
    if meta is None:
        raise ValueError(f"{path}: its checkpoint {meta_path} is missing, so what it was measured on cannot be "
                         f"checked; train the run (`{command(meta_path)}`), then {_again(path)}")
    if rec.get("weights_sha256") != meta["weights_sha256"]:
        raise ValueError(f"{path}: weights_sha256 {str(rec.get('weights_sha256'))[:12]}… is not the checkpoint's "
                         f"({meta['weights_sha256'][:12]}…, {meta_path}): measured on other weights; {_again(path)}")
    if rec.get("checkpoint_meta_sha256") != atomic.sha256_file(meta_path):
        raise ValueError(f"{path}: checkpoint_meta_sha256 is not the sha256 of {meta_path} (the checkpoint was "
                         f"retrained or replaced since it was measured); {_again(path)}")
    if rec.get("train_digest") != run_digest(params, run.variant, run.lam, run.seed):
        diff = params_difference(rec.get("train_params") or {}, trained_params(params, run.variant))
        raise ValueError(f"{path}: measured on a checkpoint trained under other parameters ({diff or 'train digest'}"
                         f"); retrain the run (`{command(meta_path)}`), then {_again(path)}")
    if rec.get("measure_digest") != stage_digest(params, "measure", run.variant):
        diff = params_difference(rec.get("measure_params") or {}, stage_inputs(params, "measure", run.variant))
        raise ValueError(f"{path}: measured under other parameters ({diff or 'measure digest'}); {_again(path)}")


def check_inputs(doc: Mapping, path, measurements: Mapping[str, str], bounds_sha256: str | None, root, what: str,
                 rewrite: str) -> None:
    """One-line ValueError unless ``doc``'s ``inputs.measurements`` is ``measurements`` (the
    ``{path under root: record_sha256}`` now) and, where it names one, its
    ``inputs.bounds_sha256`` is ``bounds_sha256``."""
    inputs = doc.get("inputs") if isinstance(doc.get("inputs"), Mapping) else {}
    named = inputs.get("measurements")
    if not isinstance(named, Mapping):
        raise ValueError(f"{path}: {what} names no measurements it was computed from (written by an older "
                         f"villani); {rewrite}")
    for rel in sorted(set(named) | set(measurements)):
        if named.get(rel) != measurements.get(rel):
            state = "is gone" if rel not in measurements else "is new" if rel not in named else "changed"
            raise ValueError(f"{path}: computed from other measurements than those in {root} now ({rel} {state} "
                             f"since); {rewrite}")
    if inputs.get("bounds_sha256") is not None and inputs["bounds_sha256"] != bounds_sha256:
        raise ValueError(f"{path}: computed from another bounds.json than the one in {root} now; {rewrite}")
