"""What a checkpoint's numbers say: the Villani diagnostic Ψ_s — its formula, interval and
names (:mod:`.psi`) — and whether a model learned at all, against the unigram model and
the collapse rule (:mod:`.collapse`)."""
