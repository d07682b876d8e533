"""Statistics (numpy and scipy only): the claims ledger's signed correlations and confidence
intervals, each with a coverage test (:mod:`.intervals`); statistics of samples and small
fits (:mod:`.samples`); time to a target on a curve (:mod:`.convergence`)."""
