"""The training runs a parameter set defines, and readers for what they wrote.

Runs are (variant, λ, seed): ``adamw`` for every λ in ``train.lambdas`` × seed, plus
``noise`` for every λ in ``train.noise.lambdas`` × seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import pandas as pd

from villani import layout
from villani.schedule import checkpoint_steps, segment_ends


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


def training_log(params: Mapping, run: Run, root="results") -> pd.DataFrame:
    """The per-step log of a run, all segments concatenated in step order."""
    frames = [pd.read_csv(run.path(layout.SEGMENT_LOG, root, step=e)) for e in segment_ends(params["train"])]
    df = pd.concat(frames, ignore_index=True).sort_values("step").reset_index(drop=True)
    return df


def checkpoint_table(params: Mapping, run: Run, root="results") -> pd.DataFrame:
    """One row per checkpoint of a run, from the checkpoint JSONs."""
    from villani.training.checkpoint import read_meta

    rows = [read_meta(root, step=s, verify=False, **run.wildcards)
            for s in checkpoint_steps(params["train"])]
    return pd.DataFrame(rows)
