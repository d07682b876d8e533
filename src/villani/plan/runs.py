"""The training runs a parameter set defines, the settings each trains under, and the runs
other stages are centred on.

Runs are (dataset, variant, λ, seed). The *variant* names the update rule and its
settings; it is a folder of every run path, so two variants never share a file:

- ``adamw`` — AdamW with the weight decay of ``train.decay_mode`` (paper Table I), every
  λ in ``train.lambdas``;
- ``adamw_lr<η>`` / ``adamw_wu<w>`` — the same at another peak learning rate η from
  ``train.sweep.lr`` (Table I's sweep) or another warm-up length w from
  ``train.sweep.warmup_steps`` (Sec. IV-D's λ × warm-up remark), every λ in
  ``train.lambdas``; η is written like λ (:func:`villani.plan.layout.format_lam`);
- ``adamw_noise`` — AdamW with Gaussian noise added to the minibatch gradient before
  clipping and a Langevin-style term after the step (``train.adamw_noise``); not eq. (36);
- ``adam_l2`` — Adam on F = L + (λ/2)‖θ‖²: the L2 term in the loss (coupled), so the
  optimizer minimises F (``train.adam_l2``);
- ``langevin`` — eq. (36) of the paper: plain SGD on F at a constant step η,
  θ ← θ − η(∇F_B(θ)) + √(2η/β)·Z, Z ~ N(0, I), the minibatch noise ξ as it comes
  (``train.langevin``; no clipping, no schedule).

Every run of every variant is trained and measured. :func:`variant_params` gives the
parameters a run of a variant trains under (its lr, warm-up, clipping, decay mode), so
training, the digests and the bounds read one place. The radial rays go through the last
checkpoint of :func:`rays_center`; the landscape of a λ is centred on every seed's run
(:func:`landscape_centres`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Iterator, Mapping

from villani.plan import layout
from villani.plan.frozen import Params, freeze

#: The update rules; sweep variants (``adamw_lr…``, ``adamw_wu…``) are AdamW.
KINDS = layout.VARIANTS
_SWEEP = re.compile(r"^adamw_(lr|wu)(.+)$")

#: What each update rule is, for legends and tables.
DESCRIPTION = {
    "adamw": "AdamW (decoupled weight decay)",
    "adamw_noise": "AdamW + gradient noise (not eq. 36)",
    "adam_l2": "Adam on F (coupled L2)",
    "langevin": "Langevin SGD on F (eq. 36)",
}


@dataclass(frozen=True)
class Run:
    dataset: str
    variant: str
    lam: float
    seed: int

    @property
    def wildcards(self) -> dict:
        return {"dataset": self.dataset, "variant": self.variant, "lam": layout.format_lam(self.lam),
                "seed": str(self.seed)}

    @property
    def kind(self) -> str:
        return variant_kind(self.variant)

    def path(self, pattern: str, root="results", **extra):
        return layout.fmt(pattern, root, dataset=self.dataset, variant=self.variant, lam=self.lam,
                          seed=self.seed, **extra)


def variant_kind(variant: str) -> str:
    """The update rule of a variant name: ``adamw_lr0.0001`` and ``adamw_wu500`` are ``adamw``."""
    if variant in KINDS:
        return variant
    if _SWEEP.match(variant):
        return "adamw"
    raise ValueError(f"unknown variant {variant!r} (variants: {', '.join(KINDS)}, adamw_lr<η>, adamw_wu<steps>)")


def is_sweep_arm(variant: str) -> bool:
    """Whether ``variant`` is an lr / warm-up sweep arm (``adamw_lr<η>``, ``adamw_wu<w>``)."""
    return bool(_SWEEP.match(variant))


def sweep_variants(params: Mapping) -> list[str]:
    """``adamw_lr<η>`` for ``train.sweep.lr`` and ``adamw_wu<w>`` for ``train.sweep.warmup_steps``."""
    sw = params["train"]["sweep"]
    return ([f"adamw_lr{layout.format_lam(x)}" for x in sw["lr"]]
            + [f"adamw_wu{int(w)}" for w in sw["warmup_steps"]])


def variant_lambdas(params: Mapping, variant: str) -> list[float]:
    """The λ values a variant runs at."""
    t = params["train"]
    kind = variant_kind(variant)
    lams = t["lambdas"] if kind == "adamw" else t[kind]["lambdas"]
    return [float(x) for x in lams]


def variants(params: Mapping) -> list[str]:
    """Every variant with at least one run, in a fixed order."""
    names = ["adamw", *sweep_variants(params), "adamw_noise", "adam_l2", "langevin"]
    return [v for v in names if variant_lambdas(params, v)]


def overridden_keys(variant: str) -> tuple[str, ...]:
    """The ``train`` keys whose value :func:`variant_params` takes from the variant (its
    name or its own group) instead of the shared setting."""
    m = _SWEEP.match(variant)
    if m:
        return ("train.lr",) if m.group(1) == "lr" else ("train.warmup_steps",)
    return {"adam_l2": ("train.decay_mode",),
            "langevin": ("train.lr", "train.warmup_steps", "train.grad_clip", "train.decay_mode")
            }.get(variant_kind(variant), ())


def variant_params(params: Mapping, variant: str) -> Params:
    """The parameters a run of ``variant`` trains under (a copy; ``params`` is unchanged).

    ``adamw_lr<η>``: ``train.lr`` = η; ``adamw_wu<w>``: ``train.warmup_steps`` = w;
    ``adam_l2``: ``train.decay_mode`` = coupled; ``langevin``: ``train.lr`` =
    ``train.langevin.lr`` (constant: ``warmup_steps`` = 0, no schedule), ``grad_clip`` =
    null, ``decay_mode`` = coupled (λθ is part of the SGD gradient). Others unchanged."""
    kind = variant_kind(variant)
    p = copy.deepcopy(dict(params))
    t = p["train"] = dict(p["train"])
    m = _SWEEP.match(variant)
    if m and m.group(1) == "lr":
        t["lr"] = float(m.group(2))
    elif m:
        t["warmup_steps"] = int(m.group(2))
    elif kind == "adam_l2":
        t["decay_mode"] = "coupled"
    elif kind == "langevin":
        t.update(lr=float(t["langevin"]["lr"]), warmup_steps=0, grad_clip=None, decay_mode="coupled")
    return freeze(p)


def runs(params: Mapping, variants_: tuple[str, ...] | list[str] | None = None) -> Iterator[Run]:
    """Every run of the variants named in ``variants_`` (default: every variant), variant by
    variant, λ then seed."""
    ds, seeds = params["data"]["name"], params["train"]["seeds"]
    for v in variants(params):
        if variants_ is not None and v not in variants_:
            continue
        for lam in variant_lambdas(params, v):
            for seed in seeds:
                yield Run(ds, v, float(lam), int(seed))


def rays_center(params: Mapping) -> tuple[Run, int]:
    """The run and step the checkpoint ray goes through (``rays.through_checkpoint``): the
    last checkpoint of (adamw, ``train.lambdas[0]``, ``train.seeds[0]``)."""
    t = params["train"]
    return Run(params["data"]["name"], "adamw", float(t["lambdas"][0]), int(t["seeds"][0])), int(t["steps"])


@dataclass(frozen=True)
class LandscapeCentre:
    """A point a landscape surface is centred on: ``kind`` (a ``landscape.centers`` value: ``init``, the
    step-0 checkpoint — Fig 3's caption; ``final``, the last — the trained θ), the run and its step."""

    kind: str
    run: Run
    step: int


def landscape_runs(params: Mapping, lam: float) -> list[Run]:
    """The runs the λ surface is centred on: (adamw, λ if λ ∈ ``train.lambdas`` else
    ``train.lambdas[0]``, s) for every s of ``train.seeds``."""
    t = params["train"]
    run_lam = float(lam) if float(lam) in [float(x) for x in t["lambdas"]] else float(t["lambdas"][0])
    return [Run(params["data"]["name"], "adamw", run_lam, int(s)) for s in t["seeds"]]


def landscape_centres(params: Mapping, lam: float) -> list[LandscapeCentre]:
    """Every centre of the λ surface, ``landscape.centers`` outer, :func:`landscape_runs`
    inner: ``init`` at step 0, ``final`` at ``train.steps``."""
    steps = {"init": 0, "final": int(params["train"]["steps"])}
    return [LandscapeCentre(kind, run, steps[kind]) for kind in params["landscape"]["centers"]
            for run in landscape_runs(params, lam)]


def langevin_beta(spec, lam: float, lr: float, std: float) -> float | None:
    """Inverse temperature β of the Langevin term √(2η/β)·Z, or None for no term.

    ``spec``: a number; ``"table1"`` = 2/(η·std²) (the paper's Table I rule β⁻¹ = ησ²/(2d)
    with σ² = std²·d: the term's per-coordinate standard deviation is η·std; None when
    std = 0); ``None`` = 1/λ (the paper's Villani prior; none at λ = 0)."""
    if spec == "table1":
        return 2.0 / (lr * std**2) if std > 0 else None
    if spec:
        return float(spec)
    return 1.0 / lam if lam > 0 else None


def run_beta(params: Mapping, variant: str, lam: float) -> float | None:
    """β of a run's injected noise √(2η/β)·Z (:func:`langevin_beta` with the variant's η):
    the ``langevin`` and ``adamw_noise`` arms; ``None`` for the others (no injected noise)."""
    kind = variant_kind(variant)
    t = variant_params(params, variant)["train"]
    if kind == "langevin":
        return langevin_beta(t["langevin"]["beta"], float(lam), float(t["lr"]), float(t["langevin"]["table1_std"]))
    if kind == "adamw_noise":
        return langevin_beta(t["adamw_noise"]["langevin_beta"], float(lam), float(t["lr"]),
                             float(t["adamw_noise"]["grad_std"]))
    return None
