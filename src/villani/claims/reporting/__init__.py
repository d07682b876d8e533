"""The ledger written from the catalogue, and the pages read from ledgers: the rows
(:mod:`~villani.claims.reporting.ledger`, ``villani claims``) with their power plan
(:mod:`~villani.claims.reporting.power`), family-wise p-values
(:mod:`~villani.claims.reporting.multiplicity`), premise chain
(:mod:`~villani.claims.reporting.chain`) and root errors (:mod:`~villani.claims.reporting.roots`);
``villani claims-report``'s pages (:mod:`~villani.claims.reporting.results_page`,
:mod:`~villani.claims.reporting.errors_page`, :mod:`~villani.claims.reporting.text`) and the
sensitivity analysis between designs (:mod:`~villani.claims.reporting.design`,
:mod:`~villani.claims.reporting.sensitivity`)."""
