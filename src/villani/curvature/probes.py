r"""Seeded Rademacher probe vectors (common random numbers across checkpoints).

A Rademacher vector has i.i.d. entries :math:`v_i \in \{-1, +1\}` with probability
1/2 each, so :math:`\mathbb{E}[v v^\top] = I` and :math:`\|v\|^2 = n` exactly.

All probes of one estimator call come, in order, from a single CPU
``torch.Generator`` seeded with ``seed``: probe ``i`` is a function of ``(seed, dim,
i)`` only — not of the device, the dtype, or how the probes are grouped into batches.
The same seed therefore gives the same probes at every checkpoint and every λ, which
makes differences between checkpoints far less noisy than the estimates themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

__all__ = ["ProbeStream", "rademacher_rows"]


class ProbeStream:
    """An ordered stream of Rademacher vectors of length ``dim`` from ``seed``.

    Args:
        dim: vector length.
        seed: seed of the CPU generator.
        dtype: dtype of the returned vectors.
        device: device of the returned vectors.
    """

    def __init__(self, dim: int, seed: int, *, dtype: torch.dtype, device: torch.device):
        self.dim = int(dim)
        self.dtype = dtype
        self.device = torch.device(device)
        self._gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def next(self, k: int = 1) -> Tensor:
        """The next ``k`` probes as a ``(k, dim)`` tensor (one draw per probe, in order)."""
        bits = torch.stack(
            [torch.randint(0, 2, (self.dim,), generator=self._gen, dtype=torch.int8) for _ in range(k)]
        )
        signs = bits.mul_(2).sub_(1)
        return signs.to(device=self.device, dtype=self.dtype)

    def chunks(self, total: int, size: int) -> Iterator[Tensor]:
        """Yield ``total`` probes in ``(≤size, dim)`` chunks."""
        if size < 1:
            raise ValueError(f"batch size must be ≥ 1, got {size}")
        done = 0
        while done < total:
            k = min(size, total - done)
            yield self.next(k)
            done += k


def rademacher_rows(k: int, dim: int, seed: int, *, dtype=torch.float64, device="cpu") -> Tensor:
    """``k`` Rademacher rows of length ``dim``: the first ``k`` probes of ``seed``."""
    return ProbeStream(dim, seed, dtype=dtype, device=torch.device(device)).next(k)
