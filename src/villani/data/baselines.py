r"""The corpus's n-gram baselines: what a model must beat to have learned anything from the data.

Both are fitted on the **train** blocks only and scored on the **whole validation split** with
exactly the targets of the model's validation loss
(:func:`villani.measure.measurement_set.mean_token_loss`): in every block x₀ … x_{T−1} of
``seq_len`` tokens, the tokens x₁ … x_{T−1} are predicted (x₀ has no context inside its block),
so N = blocks·(T − 1) targets, and

.. math:: \text{val\_loss} = -\frac1N \sum_{b}\sum_{t=1}^{T-1} \ln p(x_{b,t} \mid \cdot), \qquad
          \text{val\_ppl} = e^{\text{val\_loss}} .

The model's loss is comparable with these numbers: same blocks, same targets, natural log.

- **unigram** — add-one (Laplace) smoothing over the V tokens of the vocabulary, from the counts
  cₓ of the train targets (n of them): p(x) = (cₓ + 1)/(n + V). A token never seen in train
  gets 1/(n + V), so every validation token has a finite loss.
- **bigram** — the unigram above as a Dirichlet prior of concentration k on each context a
  ("interpolated" smoothing, MacKay & Peto 1995): p(b | a) = (c_{ab} + k·p(b))/(c_a + k), with
  c_{ab} the train pairs (x_{t−1}, x_t) inside a block (t ≥ 1) and c_a = Σ_b c_{ab}. k is chosen
  on the train split alone by leave-one-out likelihood over a grid (each pair scored with its own
  count removed: (c_{ab} − 1 + k·p(b))/(c_a − 1 + k)); validation is never used to fit it.

Pairs are counted sparsely (codes a·V + b), so a pretrained vocabulary (V ≈ 5·10⁴) costs memory
in the distinct pairs, not V².

>>> b = ngram_baselines([[0, 1, 1, 1]], [[1, 0, 1]], 2)   # train targets 1, 1, 1: p(0) = 1/5, p(1) = 4/5
>>> abs(b["unigram"]["val_loss"] - (-(math.log(1 / 5) + math.log(4 / 5)) / 2)) < 1e-12
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["UNIGRAM_SMOOTHING", "BIGRAM_SMOOTHING", "K_GRID", "unigram_probs", "ngram_baselines"]

UNIGRAM_SMOOTHING = "add-one (Laplace) over the vocabulary, train targets"
BIGRAM_SMOOTHING = ("Dirichlet prior k·p_unigram per context (interpolated), k by leave-one-out likelihood "
                    "on the train pairs")
#: Concentrations k tried for the bigram (leave-one-out on train picks one).
K_GRID = tuple(float(x) for x in np.geomspace(0.01, 1e4, 25))


def _targets(blocks: Any) -> np.ndarray:
    """The predicted tokens of every block: columns 1 … T−1, flattened."""
    x = np.asarray(blocks, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 1:
        raise ValueError(f"blocks must be (N ≥ 1, seq_len ≥ 2), got shape {x.shape}")
    return x[:, 1:].ravel()


def _pairs(blocks: Any, vocab: int) -> np.ndarray:
    """Codes a·V + b of the within-block pairs (x_{t−1}, x_t), t ≥ 1."""
    x = np.asarray(blocks, dtype=np.int64)
    return (x[:, :-1] * vocab + x[:, 1:]).ravel()


def unigram_probs(train_blocks: Any, vocab: int) -> np.ndarray:
    """p(x) = (cₓ + 1)/(n + V) from the train targets (add-one)."""
    t = _targets(train_blocks)
    counts = np.bincount(t, minlength=vocab).astype(float)
    if counts.size > vocab:
        raise ValueError(f"token id {int(t.max())} ≥ vocabulary size {vocab}")
    return (counts + 1.0) / (t.size + vocab)


def _bigram_fit(train_blocks: Any, p_uni: np.ndarray, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(pair codes, pair counts, context counts c_a, k chosen by leave-one-out) of the train pairs."""
    codes, counts = np.unique(_pairs(train_blocks, vocab), return_counts=True)
    ctx = np.bincount(codes // vocab, weights=counts, minlength=vocab)
    a, b, c = codes // vocab, codes % vocab, counts.astype(float)
    best_k, best = K_GRID[0], -math.inf
    for k in K_GRID:
        loo = np.log((c - 1.0 + k * p_uni[b]) / (ctx[a] - 1.0 + k))
        score = float(np.dot(c, loo))
        if score > best:
            best_k, best = k, score
    return codes, c, ctx, best_k


def _score(loss: float, smoothing: str, **extra: Any) -> dict[str, Any]:
    return {"val_ppl": math.exp(loss), "val_loss": loss, "smoothing": smoothing, **extra}


def ngram_baselines(train_blocks: Any, val_blocks: Any, vocab: int) -> dict[str, dict[str, Any]]:
    """``{"unigram": {...}, "bigram": {...}}``, each with ``val_ppl``, ``val_loss`` (nats per
    predicted token), ``smoothing``, and the bigram's chosen ``k``; see the module docstring."""
    vocab = int(vocab)
    p_uni = unigram_probs(train_blocks, vocab)
    val_t = _targets(val_blocks)
    if int(val_t.max()) >= vocab:
        raise ValueError(f"validation token id {int(val_t.max())} ≥ vocabulary size {vocab}")
    uni_loss = float(-np.log(p_uni[val_t]).mean())

    codes, c, ctx, k = _bigram_fit(train_blocks, p_uni, vocab)
    val_pairs = _pairs(val_blocks, vocab)
    pos = np.searchsorted(codes, val_pairs)
    pos_c = np.minimum(pos, codes.size - 1)
    c_ab = np.where(codes[pos_c] == val_pairs, c[pos_c], 0.0)
    a, b = val_pairs // vocab, val_pairs % vocab
    bi_loss = float(-np.log((c_ab + k * p_uni[b]) / (ctx[a] + k)).mean())
    targets = {"targets": int(val_t.size), "train_targets": int(_targets(train_blocks).size)}
    return {"unigram": _score(uni_loss, UNIGRAM_SMOOTHING, **targets),
            "bigram": _score(bi_loss, BIGRAM_SMOOTHING, k=k, **targets)}
