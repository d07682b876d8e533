r"""The 0/1 weight-decay mask :math:`m` of the regulariser :math:`\frac\lambda2\|m\odot\theta\|^2`
(:class:`.model_hessian.ModelHessian`): which parameter tensors it covers, and where they lie
in the flat parameter vector.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

__all__ = ["decayed_names", "decay_runs"]


def decayed_names(names: Sequence[str], params: Sequence[nn.Parameter], decay) -> list[str]:
    """The names (in ``names`` order) that the weight-decay spec ``decay`` selects: all for
    ``None``, those listed (each must be a name), or those where ``decay(name, param)``."""
    if decay is None:
        return list(names)
    if callable(decay):
        chosen = {n for n, p in zip(names, params) if decay(n, p)}
    else:
        chosen = set(decay)
        unknown = chosen - set(names)
        if unknown:
            raise ValueError(f"decay names not among the trainable parameters: {sorted(unknown)}")
    return [n for n in names if n in chosen]


def decay_runs(flags: Sequence[bool], sizes: Sequence[int]) -> list[slice]:
    """Maximal runs of consecutive flagged tensors as slices of the flat vector."""
    out, start = [], 0
    for flag, size in zip(flags, sizes):
        if flag and out and out[-1].stop == start:
            out[-1] = slice(out[-1].start, start + size)
        elif flag:
            out.append(slice(start, start + size))
        start += size
    return out
