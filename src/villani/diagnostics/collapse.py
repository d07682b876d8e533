r"""When a trained language model has learned nothing: below the unigram baseline, or collapsed.

**Learned** means *beats the corpus's unigram model*: its validation perplexity is below the
validation perplexity of the add-one unigram fitted on the train split
(:mod:`villani.data.baselines`, recorded by the tokenize stage in ``stats.json`` under
``baselines.unigram.val_ppl``; same blocks and next-token targets as the model's validation
loss). A model that does not beat it has learned less than the token frequencies:
:func:`baseline_ppl`, :func:`beats_baseline`.

**Collapsed** is the weaker, vocabulary-only rule kept for tables that have no data stats: a
model that predicts the uniform distribution over V tokens has cross-entropy ln V and
perplexity V, and a checkpoint is collapsed when its validation perplexity is at least half
the vocabulary, or its validation loss is within 2% of ln V:

.. math:: \mathrm{ppl} \ge V/2 \quad\text{or}\quad \mathrm{loss} \ge 0.98\,\ln V .

A run is collapsed when its last checkpoint is. Every collapsed run fails to beat the unigram
(whose perplexity is at most about V), not conversely.

>>> is_collapsed(511.9, None, 512), is_collapsed(None, 6.20, 512), is_collapsed(60.0, 4.09, 512)
(True, True, False)
>>> stats = {"baselines": {"unigram": {"val_ppl": 212.5, "val_loss": 5.359}}}
>>> beats_baseline(245.9, baseline_ppl(stats)), beats_baseline(54.0, baseline_ppl(stats))
(False, True)
"""

from __future__ import annotations

import math
from typing import Mapping

__all__ = ["PPL_FRACTION", "LOSS_FRACTION", "RULE", "is_collapsed", "BASELINE_RULE", "baseline_ppl",
           "beats_baseline"]

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


BASELINE_RULE = ("validation perplexity below the corpus's unigram model's (add-one, fitted on train; "
                 "stats.json baselines.unigram.val_ppl)")


def baseline_ppl(stats: Mapping, model: str = "unigram") -> float:
    """The validation perplexity of the corpus's ``model`` (``unigram`` or ``bigram``) baseline
    from a tokenize stage's ``stats.json`` dict; a one-line ``ValueError`` when it is absent."""
    try:
        value = float(stats["baselines"][model]["val_ppl"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"stats.json: baselines.{model}.val_ppl missing (expected the {model} model's validation "
                         "perplexity; rerun `villani tokenize` to record it)") from None
    if not (math.isfinite(value) and value >= 1.0):
        raise ValueError(f"stats.json: baselines.{model}.val_ppl = {value!r} (expected a finite number ≥ 1)")
    return value


def beats_baseline(val_ppl: float | None, baseline: float) -> bool:
    """Whether a validation perplexity is strictly below the baseline's (:data:`BASELINE_RULE`);
    ``False`` for an unknown or non-finite perplexity (nothing learned is shown)."""
    if val_ppl is None or not math.isfinite(float(val_ppl)):
        return False
    return float(val_ppl) < float(baseline)
