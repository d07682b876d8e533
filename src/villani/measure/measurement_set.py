"""The fixed measurement set and exact token losses.

**Measurement set.** L(θ) of SPEC §1 is the mean next-token cross-entropy over a fixed
subsample of the train split: ``measure.blocks`` block ids drawn without replacement by
``numpy.random.default_rng(measure.set_seed)`` and sorted. The ids depend only on the
seed, the number of train blocks and ``measure.blocks`` — the same token ids for every
checkpoint, λ and seed, for the rays and for the landscape. The blocks are cut into
micro-batches of ``measure.batch_size``; every predicted token weighs the same
(:class:`villani.curvature.ModelHessian`'s convention).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from villani.plan import layout
from villani.plan.config import ParamsError
from villani.plan.frozen import Params

__all__ = [
    "measurement_block_ids",
    "sample_block_ids",
    "measurement_blocks",
    "measurement_batches",
    "mean_token_loss",
]


def measurement_block_ids(params: Params, n_train: int) -> np.ndarray:
    """Sorted ids of the ``measure.blocks`` train blocks of the measurement set.

    A set larger than the train split is a one-line :class:`ParamsError` naming
    ``measure.blocks`` and both numbers.
    """
    me = params.measure
    k, n = me.blocks, n_train
    if k > n:
        raise ParamsError(
            f"measure.blocks: {k} > {n}, the number of train blocks of dataset {params.data.name!r} "
            f"(lower measure.blocks or use more data)")
    return sample_block_ids(n, k, me.set_seed)


def sample_block_ids(n_blocks: int, k: int, seed: int) -> np.ndarray:
    """``k`` of ``n_blocks`` block ids drawn without replacement by
    ``numpy.random.default_rng(seed)``, sorted (``k ≤ n_blocks``)."""
    rng = np.random.default_rng(int(seed))
    return np.sort(rng.choice(int(n_blocks), size=int(k), replace=False)).astype(np.int64)


def train_blocks(params: Params, root) -> torch.Tensor:
    from villani.data import load_split

    return load_split(params, root, "train")


def measurement_blocks(params: Params, root, train: torch.Tensor | None = None) -> tuple[np.ndarray, torch.Tensor]:
    """(ids, blocks ``(measure.blocks, seq_len)``) of the measurement set."""
    train = train_blocks(params, root) if train is None else train
    ids = measurement_block_ids(params, train.shape[0])
    return ids, train[torch.from_numpy(ids)]


def measurement_batches(params: Params, root, device="cpu", train: torch.Tensor | None = None
                        ) -> tuple[np.ndarray, list[torch.Tensor]]:
    """(ids, micro-batches of ``measure.batch_size`` blocks on ``device``)."""
    ids, blocks = measurement_blocks(params, root, train)
    return ids, [b.to(device) for b in blocks.split(params.measure.batch_size)]


def mean_token_loss(model: torch.nn.Module, batches: Iterable[torch.Tensor],
                    state: Mapping[str, torch.Tensor] | None = None) -> tuple[float, int]:
    """(mean next-token cross-entropy over every predicted token of ``batches``, token count).

    No gradients; sums accumulate in float64. With ``state`` (name → tensor) the model is
    evaluated at those parameters by ``torch.func.functional_call`` — the module itself is
    never modified.
    """
    from torch.func import functional_call

    from villani.curvature import causal_lm_token_loss

    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for x in batches:
            kw = {"input_ids": x, "use_cache": False}
            out = model(**kw) if state is None else functional_call(model, dict(state), args=(), kwargs=kw)
            total += float(causal_lm_token_loss(out.logits.float(), x).double())
            count += x.shape[0] * (x.shape[1] - 1)
    return total / count, count
