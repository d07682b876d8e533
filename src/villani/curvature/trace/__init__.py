"""Trace estimators: free functions of an operator, one module per method.

- :mod:`.hutchinson` — Girard–Hutchinson with Rademacher probes, its free by-products,
  per-block traces; optionally deflated (:mod:`.deflated_hutchinson`) and stopped at a CI
  target (:mod:`.two_stage`, Stein's two-stage rule);
- :mod:`.hutchpp` — Hutch++ (Meyer, Musco, Musco and Woodruff 2021);
- :mod:`.doubly_stochastic` — Hutchinson on random subsets of the data blocks;
- :mod:`.estimate` — their record, :class:`~.estimate.TraceEstimate`.
"""
