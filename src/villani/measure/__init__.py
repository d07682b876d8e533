"""Measurements at trained parameters — every stage that evaluates a model's curvature.

- :mod:`.checkpoint` — ``villani measure``: one checkpoint → ``measure/step{step}.json`` +
  ``.parquet`` (keys documented in ``docs/measurements.md``);
- :mod:`.measurement_set` — the fixed measurement set and exact losses;
- :mod:`.parameter_groups` — the per-block trace groups of each model family;
- :mod:`.grad_noise` — the minibatch gradient-noise σ² of Table I;
- :mod:`.rays` — ``villani rays``: Ψ_s along radial rays (Fig 2);
- :mod:`.landscape` — ``villani landscape``: a 2-D loss surface (Fig 3);
- :mod:`.hvp_cost` — ``villani cost``: HVP time and memory vs model size (Fig 10).

Ψ_s itself is defined in :mod:`villani.diagnostics.psi`; results are read back through
:mod:`villani.io.results`.
"""

__all__ = ["measure_checkpoint"]


def __getattr__(name: str):
    """``measure_checkpoint`` on first use: importing a light module of this package (the
    cost model's rates, which the workflow's parse reads) loads no torch."""
    if name == "measure_checkpoint":
        from villani.measure.measure_stage import measure_checkpoint

        return measure_checkpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
