r"""The paper's own numbers, in one place, each cited by table, figure or equation.

The claims of class *arithmetic* (:data:`villani.claims.catalogue.registry.ARITHMETIC`) are decided
from these inputs alone — at any scale, before any run — by the bound code of
:mod:`villani.bounds.theory` wherever a formula of the paper is involved. The λ grid, the
learning rate and the step count of the PTB runs live in :mod:`villani.plan.paper_lambda`
(``PAPER_LAMBDAS``, ``PAPER_LR``, ``PAPER_STEPS``), which the λ match uses too. The paper prints
no step count: ``PAPER_STEPS`` = 40 epochs (Table I) × 887k PTB tokens (Table II) / 512 tokens
per step (Table I's batch) = 69,297, and :data:`WT103_STEPS` = 5 × 103M / 512 = 1,005,859 —
the paper's longest run.

Table III is held per dataset (PTB and WikiText-103 rows): a ledger of PTB or WikiText-103
tests that corpus's rows; a ledger of any other corpus (the embedded default) tests PTB's,
the paper's small-data corpus, and says so (:func:`table3_for`).
"""

from __future__ import annotations

import math
from typing import Mapping

from villani.plan.paper_lambda import (PAPER_LAMBDAS, PAPER_LR, PAPER_PTB_TOKENS, PAPER_STEPS, PAPER_TOKENS_PER_STEP,
                                      WT103_EPOCHS, WT103_STEPS, WT103_TOKENS)

__all__ = ["PAPER_D", "PAPER_M", "PAPER_S", "PAPER_VOCAB", "PAPER_SEEDS", "PAPER_WARMUP", "PAPER_LRS",
           "PAPER_NOISE_STD", "PTB_TOKENS_TABLE2", "WT103_TOKENS_TABLE2", "PTB_TOKENS_FIG5", "WT103_EPOCHS", "WT103_STEPS",
           "TABLE3", "TABLE3_DATASETS", "table3_for", "WMAX", "C1", "NEO125M_LAYERS", "NEO125M_WIDTH",
           "PAPER_MODEL_SIZES", "FIG9_PHASES", "FIG8_LAM_D", "FIG10_D",
           "APPB_THETA", "APPB_ERROR", "PAPER_LAMBDAS", "PAPER_LR", "PAPER_STEPS", "paper_budget", "init_loss"]

#: Parameters of GPT-Neo-125M (Sec. VI-E, Fig 5 caption, App. A-B: d ≈ 1.25·10⁸).
PAPER_D = 1.25e8
#: Hutchinson probes per checkpoint (Sec. IV-C, Fig 8, Table III: M = 64).
PAPER_M = 64
#: The Villani temperature of every experiment (Sec. VI-C: "s = 1 fixed").
PAPER_S = 1.0
#: GPT-Neo's GPT-2 BPE vocabulary (EleutherAI/gpt-neo-125m): a model that knows nothing has loss ln V.
PAPER_VOCAB = 50_257
#: Seeds (Fig 5 caption: "±1 s.e.m. across three random seeds").
PAPER_SEEDS = 3
#: Linear warm-up steps (Sec. VI-A2: "a linear warm-up over 5,000 steps").
PAPER_WARMUP = 5_000
#: Table I's learning rates.
PAPER_LRS = (5e-5, 1e-4, 2e-4)
#: Table I's gradient noise N(0, 0.05²) per coordinate.
PAPER_NOISE_STD = 0.05
#: Table II: PTB 887k tokens, WikiText-103 103M tokens.
PTB_TOKENS_TABLE2, WT103_TOKENS_TABLE2 = PAPER_PTB_TOKENS, WT103_TOKENS
#: Fig 5's caption: "Penn Treebank (small dataset, N ≈ 42,000 tokens)".
PTB_TOKENS_FIG5 = 42_000
#: Table I: 5 epochs on WikiText-103; its runs (the paper's longest): 5 · 103M tokens / 512 tokens per
#: step (:data:`villani.plan.paper_lambda.WT103_STEPS`).

#: Table III: mean tr ∇²F (×10⁸), per-sample relative error and 95% CI, by dataset and paper λ name.
TABLE3: dict[str, dict[str, tuple[float, float, float]]] = {
    "ptb": {"zero": (1.74, 0.109, 0.048), "middle": (6.42, 0.048, 0.078), "strong": (58.4, 0.050, 0.73)},
    "wikitext103": {"zero": (1.69, 0.124, 0.054), "middle": (6.31, 0.051, 0.080), "strong": (57.9, 0.052, 0.76)},
}
#: How Table III names its datasets.
TABLE3_DATASETS = {"ptb": "PTB", "wikitext103": "WT-103"}

#: App. A, eq. 54–55: W*_max ≈ 0.9 for GPT-Neo-125M at λ = 10⁻³, "giving C₁ ≈ 7.6".
WMAX, C1 = 0.9, 7.6
#: GPT-Neo-125M's depth (Sec. VI-A: "12 layers") and width (EleutherAI/gpt-neo-125m's config:
#: hidden_size 768 — the paper does not print it; its own d ≈ 12·L·d_model² (Fig 1) gives 932).
NEO125M_LAYERS, NEO125M_WIDTH = 12, 768
#: The model sizes the paper measures anything at: GPT-Neo-125M only (Sec. VI "using GPT-Neo-125M",
#: Fig 10 caption "The validated region (green) shows empirical results from GPT-Neo-125M",
#: Sec. VII-A "direct validation at > 7B scale would require distributed Hessian-vector product
#: estimation, which is not yet implemented").
PAPER_MODEL_SIZES = (PAPER_D,)
#: Fig 9's caption: initial phase 0–5k steps, transition 5k–35k, stable from 35k.
FIG9_PHASES = (5_000, 35_000)
#: Fig 8's caption: "the trace converging to λd ≈ 58 × 10⁸" (λ = 10⁻³).
FIG8_LAM_D = 58e8
#: Fig 10 / Sec. VI-I: "favourable scaling … even as d approaches 10¹²".
FIG10_D = 1e12
#: App. A-B: "< 3% absolute error once ‖θ‖ ≳ 10⁴" (M = 64, d ≈ 1.25·10⁸, λ = 10⁻³).
APPB_THETA, APPB_ERROR = 1e4, 0.03


def table3_for(dataset: str) -> tuple[str, dict[str, tuple[float, float, float]]]:
    """(Table III's dataset key, its rows) for our corpus: its own rows for PTB and
    WikiText-103, PTB's (the paper's small-data corpus) for any other."""
    key = dataset if dataset in TABLE3 else "ptb"
    return key, TABLE3[key]


def paper_budget(name: str) -> float:
    """λ·η·T of the paper's PTB run at its λ called ``name``."""
    return PAPER_LAMBDAS[name] * PAPER_LR * PAPER_STEPS


def init_loss() -> float:
    """The loss of a model that knows nothing: ln V (V = GPT-Neo's vocabulary)."""
    return math.log(PAPER_VOCAB)


def lam_name(lam: float, names: Mapping[str, float] = PAPER_LAMBDAS) -> str:
    """The paper's name of λ (``strong`` for 10⁻²)."""
    return next(k for k, v in names.items() if v == lam)
