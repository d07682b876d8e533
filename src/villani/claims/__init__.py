"""The claims ledger: every quantitative claim of the paper, our statistic with its
confidence interval, and a verdict by the rule of ``docs/claims.md``
(:mod:`villani.claims.verdict`), computed from the results (:mod:`villani.claims.ledger`).
"""
