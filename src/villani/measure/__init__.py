"""Per-checkpoint measurement (SPEC §2) and readers of its results.

- :func:`measure_checkpoint` — one checkpoint → ``measure/step{step}.json`` + ``.parquet``
  (:mod:`.checkpoint_measure`; keys documented in ``docs/measurements.md``);
- :mod:`.measurement_set` — the fixed measurement set, parameter groups, exact losses;
- :mod:`.spectrum` — top-k eigenvalues and SLQ from one set of Lanczos runs;
- :mod:`.grad_noise` — the minibatch gradient-noise σ² of Table I;
- :mod:`.summary` — :func:`load_measurements` (a DataFrame for figures) and
  :func:`measurement_metrics` (headline numbers for ``results/metrics.json``).
"""

from villani.measure.checkpoint_measure import measure_checkpoint, psi_key, read_measure
from villani.measure.summary import load_measurements, load_samples, measurement_metrics

__all__ = ["measure_checkpoint", "psi_key", "read_measure", "load_measurements", "load_samples",
           "measurement_metrics"]
