r"""When a trained language model has learned nothing: the *collapsed* run.

A model that predicts the uniform distribution over a vocabulary of V tokens has
cross-entropy ln V and perplexity V. A checkpoint is **collapsed** when its validation
perplexity is at least half the vocabulary, or its validation loss is within 2% of ln V:

.. math:: \mathrm{ppl} \ge V/2 \quad\text{or}\quad \mathrm{loss} \ge 0.98\,\ln V .

A run is collapsed when its last checkpoint is. The bounds table marks such rows
(``collapsed``) and the claims ledger decides no claim on a collapsed run (its rows say
which runs were left out and why).

>>> is_collapsed(511.9, None, 512), is_collapsed(None, 6.20, 512), is_collapsed(60.0, 4.09, 512)
(True, True, False)
"""

from __future__ import annotations

import math

__all__ = ["PPL_FRACTION", "LOSS_FRACTION", "RULE", "is_collapsed"]

PPL_FRACTION, LOSS_FRACTION = 0.5, 0.98
RULE = "validation perplexity ≥ V/2 or validation loss ≥ 0.98·ln V (V the vocabulary)"


def is_collapsed(val_ppl: float | None, val_loss: float | None, vocab_size: int) -> bool | None:
    """Whether a checkpoint with this validation perplexity / loss is collapsed (:data:`RULE`);
    ``None`` when neither is known."""
    v = int(vocab_size)
    if v < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size!r}")
    known = [x for x in (val_ppl, val_loss) if x is not None and math.isfinite(float(x))]
    if not known:
        return None
    by_ppl = val_ppl is not None and float(val_ppl) >= PPL_FRACTION * v
    by_loss = val_loss is not None and float(val_loss) >= LOSS_FRACTION * math.log(v)
    return bool(by_ppl or by_loss)
