"""The bounds of the paper's section V.

- :mod:`.theory` — the formulas as pure functions of numbers (C_LS, C_P, Theorem 2's η and
  step count, the eq. 41 envelope, Table I's guideline checks);
- :mod:`.pac_bayes` — the PAC-Bayes bound (eq. 43–44, Corollary 2), pure functions too;
- :mod:`.hypotheses` — the hypotheses each family of bounds rests on, checked per checkpoint;
- :mod:`.table` — ``villani bounds``: one row per checkpoint from the measurements,
  ``bounds.csv`` and ``bounds.json``.
"""
