"""The claims ledger: every quantitative claim of the paper, its statistic, interval and verdict.

- :mod:`.verdict` — the rule (supported / refuted / inconclusive; per unit; untestable);
- :mod:`.registry` — where claims are declared (:func:`~.registry.claim`, next to their computation);
- :mod:`.context` — the results a ledger reads (collapsed runs marked, the paper-λ match);
- one module per figure or table: :mod:`.fig2` … :mod:`.fig7`, :mod:`.trace` (Fig 8, 9,
  Table III, App. B), :mod:`.scale` (claims this scale cannot decide);
- :mod:`.ledger` — ``villani claims``: the rows, CSV and JSON.
"""
