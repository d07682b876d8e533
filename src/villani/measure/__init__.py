"""Measurements at trained parameters — every stage that evaluates a model's curvature.

- :mod:`.checkpoint` — ``villani measure``: one checkpoint → ``measure/step{step}.json`` +
  ``.parquet`` (keys documented in ``docs/measurements.md``);
- :mod:`.measurement_set` — the fixed measurement set and exact losses;
- :mod:`.parameter_groups` — the per-block trace groups of each model family;
- :mod:`.grad_noise` — the minibatch gradient-noise σ² of Table I;
- :mod:`.rays` — ``villani rays``: Ψ_s along radial rays (Fig 2);
- :mod:`.landscape` — ``villani landscape``: a 2-D loss surface (Fig 3);
- :mod:`.hvp_cost` — ``villani cost``: HVP time and memory vs model size (Fig 10).

Ψ_s itself is defined in :mod:`villani.psi`; results are read back through
:mod:`villani.io.results`.
"""

from villani.measure.checkpoint import measure_checkpoint

__all__ = ["measure_checkpoint"]
