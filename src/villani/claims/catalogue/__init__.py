"""The catalogue of claims: every quantitative claim of the paper, declared next to its computation
(:mod:`~villani.claims.catalogue.registry`), with the verdict rule
(:mod:`~villani.claims.catalogue.verdict`), the results a ledger reads
(:mod:`~villani.claims.catalogue.context`), the paper's own numbers
(:mod:`~villani.claims.catalogue.paper`), the premises (:mod:`~villani.claims.catalogue.premises`,
:mod:`~villani.claims.catalogue.derivation`), one module per figure or table
(:mod:`~villani.claims.catalogue.fig2` … :mod:`~villani.claims.catalogue.fig8`,
:mod:`~villani.claims.catalogue.noise`, :mod:`~villani.claims.catalogue.table3`,
:mod:`~villani.claims.catalogue.trace_numbers`, :mod:`~villani.claims.catalogue.scale`) and what
they share (:mod:`~villani.claims.catalogue.pooled`, :mod:`~villani.claims.catalogue.price`)."""
