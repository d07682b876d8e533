"""Files: atomic writes (:mod:`.atomic`) and the one reader of every stage's results
(:mod:`.results`). Imports only :mod:`villani.plan` (paths and runs) and :mod:`villani.diagnostics.psi`."""
