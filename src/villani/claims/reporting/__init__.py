"""The ledger written from the catalogue, and the pages read from ledgers: the rows
(:mod:`.ledger`, ``villani claims``) with their power plan (:mod:`.power`), family-wise
p-values (:mod:`.multiplicity`), premise chain (:mod:`.chain`) and root errors
(:mod:`.roots`); ``villani claims-report``'s pages (:mod:`.results_page`,
:mod:`.errors_page`, :mod:`.text`) and the sensitivity analysis between designs
(:mod:`.design`, :mod:`.sensitivity`)."""
