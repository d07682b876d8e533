"""The claims ledger: every quantitative claim of the paper, its statistic, interval and verdict.

- :mod:`.catalogue` — what the paper claims and how each claim is tested: the verdict rule, the
  registry (claims declared next to their computation), one module per figure or table;
- :mod:`.reporting` — the ledger written from the catalogue (``villani claims``: rows, CSV and
  JSON, power plan, Holm, premise chain, root errors) and the pages read from ledgers
  (``villani claims-report``).
"""
