r"""The paper's λ values and ours, matched by the decay budget λ·η·T — the one place for that rule.

A decoupled (AdamW) or coupled (L2 in SGD / Adam-on-F) decay shrinks θ by a factor ≈ (1 − ηλ)
per step, so over T steps at peak learning rate η the total shrinkage is governed by

.. math:: B = \lambda\,\eta\,T .

The paper's PTB runs use η = 10⁻⁴ (Table I's middle learning rate) for T steps, where T is
not printed: Table I gives 40 epochs and a batch of 512 tokens, Table II 887k PTB tokens, so

.. math:: T = \frac{40 \cdot 887{,}000}{512} = 69{,}296.9 \approx 69{,}297 ,

and its λ ∈ {0, 10⁻⁴, 10⁻³, 10⁻²} are the budgets B ∈ {0, 6.93·10⁻⁴, 6.93·10⁻³, 6.93·10⁻²}
(η·T = 6.93). Its WikiText-103 runs (5 epochs of Table II's 103M tokens) take
T = 5 · 103,000,000 / 512 = 1,005,859 steps (η·T = 100.6). A parameter set reproduces one of
the two designs (``claims.paper_corpus``: ``ptb``, the default, or ``wikitext103``), and its λ
are matched against that corpus's budgets (:func:`paper_steps`). Our λ that *is* the paper's λ_p under a run's own η and T is

.. math:: \lambda = \lambda_p \cdot \frac{\eta_{\text{paper}} T_{\text{paper}}}{\eta\,T},

and one of our λ is matched to λ_p when its budget is within a factor :data:`TOLERANCE` of
the paper's (λ = 0 only to λ = 0). Each update rule has its own η (Langevin's constant step
``train.langevin.lr``), so the match is made per variant
(:func:`villani.plan.runs.variant_params`). A claim about the paper's λ_p is tested only at
a matched λ; where none is matched the claim says so (:func:`match`).

>>> PAPER_STEPS
69297
>>> round(equivalent_lambda(1e-2, lr=3e-3, steps=240), 4)     # 1e-2 · 6.9297 / 0.72
0.0962
>>> round(paper_equivalent(0.12, lr=3e-3, steps=240), 5)      # 0.12 · 0.72 / 6.9297
0.01247
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from villani.plan.runs import variant_lambdas, variant_params, variants

__all__ = ["PAPER_LR", "PAPER_STEPS", "PAPER_EPOCHS", "PAPER_PTB_TOKENS", "PAPER_TOKENS_PER_STEP", "PAPER_LAMBDAS",
           "WT103_EPOCHS", "WT103_TOKENS", "WT103_STEPS", "PAPER_CORPUS_STEPS", "TOLERANCE", "LambdaMatch",
           "decay_budget", "paper_steps", "paper_equivalent", "equivalent_lambda", "match", "mapping_table"]

#: Table I: 40 epochs on PTB, a batch of 512 tokens; Table II: PTB has 887k tokens.
PAPER_EPOCHS, PAPER_TOKENS_PER_STEP, PAPER_PTB_TOKENS = 40, 512, 887_000
#: The paper's peak learning rate (Table I's middle one) and its PTB runs' steps, derived from
#: the numbers it states (the paper prints no step count): 40 · 887,000 / 512 = 69,296.9.
PAPER_LR, PAPER_STEPS = 1e-4, round(PAPER_EPOCHS * PAPER_PTB_TOKENS / PAPER_TOKENS_PER_STEP)
#: Table I: 5 epochs on WikiText-103; Table II: 103M tokens. Its runs' steps, derived the same way.
WT103_EPOCHS, WT103_TOKENS = 5, 103_000_000
WT103_STEPS = round(WT103_EPOCHS * WT103_TOKENS / PAPER_TOKENS_PER_STEP)
#: The paper's steps per corpus (``claims.paper_corpus``).
PAPER_CORPUS_STEPS = {"ptb": PAPER_STEPS, "wikitext103": WT103_STEPS}
#: The paper's λ values by name (the names the claims use).
PAPER_LAMBDAS = {"zero": 0.0, "weak": 1e-4, "middle": 1e-3, "strong": 1e-2}
#: Our λ matches the paper's when the decay budgets differ by less than this factor.
TOLERANCE = 1.5


def decay_budget(lam: float, lr: float, steps: int) -> float:
    """B = λ·η·T."""
    return float(lam) * float(lr) * int(steps)


def paper_steps(params: Mapping | None = None) -> int:
    """T_paper of the design ``params`` reproduces (``claims.paper_corpus``; PTB's without params)."""
    corpus = "ptb" if params is None else params["claims"]["paper_corpus"]
    return PAPER_CORPUS_STEPS[corpus]


def paper_equivalent(lam: float, *, lr: float, steps: int, paper_t: int = PAPER_STEPS) -> float:
    """The paper's λ with the same budget as ours: λ·η·T / (η_paper·T_paper)."""
    return decay_budget(lam, lr, steps) / (PAPER_LR * paper_t)


def equivalent_lambda(paper_lam: float, *, lr: float, steps: int, paper_t: int = PAPER_STEPS) -> float:
    """Our λ with the budget of the paper's λ_p: λ_p·η_paper·T_paper / (η·T)."""
    return float(paper_lam) * PAPER_LR * paper_t / (float(lr) * int(steps))


@dataclass(frozen=True)
class LambdaMatch:
    """The paper's λ (``paper``) and the λ we test it at (``ours``; ``None`` when no λ of the
    variant has its budget), with both budgets λ·η·T and the variant's η and T."""

    name: str
    paper: float
    ours: float | None
    paper_budget: float
    our_budget: float | None
    variant: str
    lr: float
    steps: int
    paper_t: int = PAPER_STEPS

    def text(self) -> str:
        """``paper λ = 1e-02 ↔ ours 0.12 (λ·η·T 0.0693 vs 0.0864)`` for a claim row."""
        if self.ours is None:
            want = equivalent_lambda(self.paper, lr=self.lr, steps=self.steps, paper_t=self.paper_t)
            return (f"paper λ = {self.paper:g} (λ·η·T = {self.paper_budget:.3g}) has no match among our {self.variant} "
                    f"λ (it would be λ ≈ {want:.3g} at η = {self.lr:g}, T = {self.steps})")
        return (f"paper λ = {self.paper:g} ↔ our λ = {self.ours:g} (λ·η·T {self.paper_budget:.3g} vs "
                f"{self.our_budget:.3g}; η = {self.lr:g}, T = {self.steps})")

    def to_dict(self) -> dict:
        return {"paper_lambda": self.paper, "our_lambda": self.ours, "paper_budget": self.paper_budget,
                "our_budget": self.our_budget, "variant": self.variant}


def _lr_steps(params: Mapping, variant: str) -> tuple[float, int]:
    t = variant_params(params, variant)["train"]
    return float(t["lr"]), int(t["steps"])


def match(params: Mapping, name: str, variant: str = "adamw") -> LambdaMatch:
    """Our λ of ``variant`` for the paper's λ called ``name`` (a key of :data:`PAPER_LAMBDAS`):
    the one whose budget λ·η·T is closest to the paper's, if within :data:`TOLERANCE`."""
    if name not in PAPER_LAMBDAS:
        raise ValueError(f"paper λ name {name!r}: allowed {', '.join(PAPER_LAMBDAS)}")
    lr, steps = _lr_steps(params, variant)
    paper, paper_t = PAPER_LAMBDAS[name], paper_steps(params)
    target = paper * PAPER_LR * paper_t
    best, best_dist = None, math.inf
    for lam in variant_lambdas(params, variant):
        b = decay_budget(lam, lr, steps)
        if (b == 0.0) != (target == 0.0):
            continue
        dist = 0.0 if target == 0.0 else abs(math.log(b / target))
        if dist < best_dist:
            best, best_dist = float(lam), dist
    if best_dist > math.log(TOLERANCE):
        best = None
    return LambdaMatch(name, paper, best, target, None if best is None else decay_budget(best, lr, steps),
                       variant, lr, steps, paper_t)


def mapping_table(params: Mapping) -> list[dict]:
    """Every λ of every variant with its budget and paper equivalent (for the docs and the report)."""
    rows = []
    for v in variants(params):
        lr, steps = _lr_steps(params, v)
        for lam in variant_lambdas(params, v):
            rows.append({"variant": v, "lambda": float(lam), "lr": lr, "steps": steps,
                         "budget": decay_budget(lam, lr, steps),
                         "paper_equivalent": paper_equivalent(lam, lr=lr, steps=steps, paper_t=paper_steps(params))})
    return rows
