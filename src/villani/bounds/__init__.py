"""The bounds of the paper's section V.

- :mod:`.theory` — the formulas as pure functions of numbers (C_LS, C_P, Theorem 2's η and
  step count, the eq. 41 envelope, the PAC-Bayes bound, Table I's guideline checks);
- :mod:`.hypotheses` — the hypotheses each family of bounds rests on, checked per checkpoint;
- :mod:`.table` — ``villani bounds``: one row per checkpoint from the measurements,
  ``bounds.csv`` and ``bounds.json``.
"""
