"""The training runs a parameter set defines, and the runs other stages are centred on.

Runs are (dataset, variant, λ, seed): ``adamw`` for every λ in ``train.lambdas`` × seed,
plus ``noise`` for every λ in ``train.noise.lambdas`` × seed. The radial rays go through
the last checkpoint of :func:`rays_center`; the landscape of a λ is centred on
:func:`landscape_center`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

from villani.plan import layout


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

    def path(self, pattern: str, root="results", **extra):
        return layout.fmt(pattern, root, dataset=self.dataset, variant=self.variant, lam=self.lam,
                          seed=self.seed, **extra)


def runs(params: Mapping, variants: tuple[str, ...] = layout.VARIANTS) -> Iterator[Run]:
    t, ds = params["train"], params["data"]["name"]
    if "adamw" in variants:
        for lam in t["lambdas"]:
            for seed in t["seeds"]:
                yield Run(ds, "adamw", float(lam), int(seed))
    if "noise" in variants:
        for lam in t["noise"]["lambdas"]:
            for seed in t["seeds"]:
                yield Run(ds, "noise", float(lam), int(seed))


def rays_center(params: Mapping) -> tuple[Run, int]:
    """The run and step the checkpoint ray goes through (``rays.through_checkpoint``): the
    last checkpoint of (adamw, ``train.lambdas[0]``, ``train.seeds[0]``)."""
    t = params["train"]
    return Run(params["data"]["name"], "adamw", float(t["lambdas"][0]), int(t["seeds"][0])), int(t["steps"])


def landscape_center(params: Mapping, lam: float) -> tuple[Run, int]:
    """The run and step at the centre of the λ surface: step 0 (``landscape.center: init``)
    or the last checkpoint (``final``) of (adamw, λ if λ ∈ ``train.lambdas`` else
    ``train.lambdas[0]``, ``train.seeds[0]``)."""
    t = params["train"]
    run_lam = float(lam) if float(lam) in [float(x) for x in t["lambdas"]] else float(t["lambdas"][0])
    step = 0 if params["landscape"]["center"] == "init" else int(t["steps"])
    return Run(params["data"]["name"], "adamw", run_lam, int(t["seeds"][0])), step
