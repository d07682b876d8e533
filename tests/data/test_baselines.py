"""The corpus's unigram and bigram baselines: hand computations, the model's targets, stats.json."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from villani.diagnostics.collapse import baseline_ppl, beats_baseline
from villani.data import tokenize
from villani.data.baselines import K_GRID, ngram_baselines, unigram_probs
from villani.io.results import read_stats
from villani.measure.measurement_set import mean_token_loss


def test_unigram_by_hand():
    """V = 3; train targets (columns 1..3 of each block): 1, 1, 2 | 2, 2, 2 → counts 0, 2, 4 of n = 6;
    add-one: p = (1, 3, 5)/9. Validation targets 0, 1 | 2, 2 (first column never predicted)."""
    train = [[0, 1, 1, 2], [1, 2, 2, 2]]
    val = [[2, 0, 1], [0, 2, 2]]
    b = ngram_baselines(train, val, 3)["unigram"]
    want = -(math.log(1 / 9) + math.log(3 / 9) + 2 * math.log(5 / 9)) / 4
    assert b["val_loss"] == pytest.approx(want, rel=1e-12)
    assert b["val_ppl"] == pytest.approx(math.exp(want), rel=1e-12)
    assert b["targets"] == 4 and b["train_targets"] == 6 and "add-one" in b["smoothing"]


def test_bigram_by_hand_with_the_chosen_k():
    """Pairs inside blocks only; p(b | a) = (c_ab + k p(b))/(c_a + k) with the unigram p."""
    train = [[0, 1, 0, 1], [1, 0, 1, 1]]
    val = [[0, 1, 1], [1, 0, 0]]
    out = ngram_baselines(train, val, 2)
    k = out["bigram"]["k"]
    assert k in K_GRID
    p = unigram_probs(train, 2)  # targets 1, 0, 1, 0, 1, 1: counts 2, 4 → (3, 5)/8
    assert p.tolist() == [3 / 8, 5 / 8]
    # train pairs: (0,1) ×3, (1,0) ×2, (1,1) ×1 → c_0 = 3, c_1 = 3
    c = {(0, 1): 3, (1, 0): 2, (1, 1): 1}
    ctx = {0: 3, 1: 3}
    pairs = [(0, 1), (1, 1), (1, 0), (0, 0)]
    want = -np.mean([math.log((c.get((a, b), 0) + k * p[b]) / (ctx[a] + k)) for a, b in pairs])
    assert out["bigram"]["val_loss"] == pytest.approx(want, rel=1e-12)
    # leave-one-out on train chose k: no other grid value scores higher
    def loo(kk):
        return sum(n * math.log((n - 1 + kk * p[b]) / (ctx[a] - 1 + kk)) for (a, b), n in c.items())
    assert all(loo(k) >= loo(other) - 1e-12 for other in K_GRID)


def test_unigram_loss_is_the_model_validation_loss_of_a_unigram_model():
    """A model whose logits are log p_unigram at every position has, under the pipeline's own
    validation loss (mean_token_loss: blocks, targets 1..T−1), exactly the recorded unigram loss."""
    rng = np.random.default_rng(0)
    vocab = 7
    train = rng.integers(0, vocab - 1, size=(30, 9))  # token 6 never in train: finite by add-one
    val = rng.integers(0, vocab, size=(11, 9))
    logp = torch.tensor(np.log(unigram_probs(train, vocab)))

    class Unigram(torch.nn.Module):
        def forward(self, input_ids, use_cache=False):
            return SimpleNamespace(logits=logp.expand(*input_ids.shape, vocab))

    loss, count = mean_token_loss(Unigram(), torch.from_numpy(val).split(4))
    rec = ngram_baselines(train, val, vocab)["unigram"]
    assert count == rec["targets"] == 11 * 8
    assert rec["val_loss"] == pytest.approx(loss, rel=1e-6)  # the model path computes in float32


def test_bigram_beats_unigram_on_a_corpus_with_structure(tmp_path, make_cfg, make_lines):
    """A local corpus: both recorded in stats.json (read back through the validating reader),
    finite, and on text with word order the bigram is the lower."""
    (tmp_path / "train.txt").write_text("\n".join(make_lines("tr", 400)) + "\n")
    cfg = make_cfg(source="files", files={"train": str(tmp_path / "train.txt")},
                   tokenizer={"kind": "bpe", "vocab_size": 300, "name": None}, seq_len=32)
    stats = tokenize(cfg, tmp_path / "out")
    assert read_stats(tmp_path / "out") == stats
    uni, bi = stats["baselines"]["unigram"], stats["baselines"]["bigram"]
    assert 1.0 < bi["val_ppl"] < uni["val_ppl"] < stats["vocab_size"]
    assert baseline_ppl(stats) == uni["val_ppl"] and baseline_ppl(stats, "bigram") == bi["val_ppl"]
    assert uni["targets"] == stats["splits"]["validation"]["blocks"] * 31


def test_baseline_missing_or_bad_is_a_one_line_error(tmp_path, pydoc_out):
    with pytest.raises(ValueError, match=r"^stats\.json: baselines\.unigram\.val_ppl missing .*villani tokenize") as e:
        baseline_ppl({"vocab_size": 512})
    assert "\n" not in str(e.value)
    out, stats = pydoc_out
    bad = dict(stats, baselines={"unigram": {"val_ppl": 0.5, "val_loss": 1.0}})
    (tmp_path / "stats.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=r"baselines\.unigram\.val_ppl.*0\.5"):
        read_stats(tmp_path)
    (tmp_path / "stats.json").write_text(json.dumps(dict(stats, baselines={"unigram": {"val_ppl": 9.0}})))
    with pytest.raises(ValueError, match=r"baselines\.unigram\.val_loss: missing"):
        read_stats(tmp_path)


def test_beats_baseline_is_strict_and_unknown_is_not_learned():
    assert beats_baseline(212.4, 212.5) and not beats_baseline(212.5, 212.5)
    assert not beats_baseline(None, 212.5) and not beats_baseline(float("nan"), 212.5)
    assert not beats_baseline(245.9, 212.5)
