"""Spectrum estimators: free functions of an operator, one module per method.

- :mod:`.lanczos` — Lanczos with full re-orthogonalisation, the top eigenvalues;
- :mod:`.slq` — stochastic Lanczos quadrature of the spectral density;
- :mod:`.ritz`, :mod:`.density` — their records (:class:`~.ritz.LanczosResult`,
  :class:`~.ritz.EigenResult`, :class:`~.density.SpectralDensity`).
"""
