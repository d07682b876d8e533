"""Curvature engine: symmetric linear operators and free-function estimators.

Operators are anything with ``dim`` and ``matvec(v)`` (see :mod:`.operators`); the
estimators — :func:`hutchinson`, :func:`hutchpp`, :func:`lanczos`,
:func:`top_eigenvalues`, :func:`slq` — only use that protocol. :class:`ModelHessian`
is the Hessian of a causal LM's regularised token loss. Across processes, with vectors
sharded (:class:`ShardedVectors`): :class:`DataParallelHessian` (exact, model
replicated) and :class:`FiniteDifferenceHessian` (central differences of FSDP2-sharded
gradients; also on one process). Numerics: ``docs/curvature.md``.
"""

from .causal_lm_loss import causal_lm_token_loss
from .data_parallel_hessian import DataParallelHessian
from .finite_difference_hessian import FiniteDifferenceHessian
from .hutchinson import hutchinson
from .lanczos import lanczos, top_eigenvalues
from .meyer2021hutchpp import hutchpp
from .model_hessian import ModelHessian
from .operators import (
    CallableOperator,
    DenseOperator,
    LinearOperator,
    ShiftedOperator,
    as_operator,
)
from .results import EigenResult, LanczosResult, SpectralDensity, TraceEstimate
from .sharded_vectors import ShardedVectors
from .slq import slq

__all__ = [
    "LinearOperator",
    "DenseOperator",
    "CallableOperator",
    "ShiftedOperator",
    "as_operator",
    "hutchinson",
    "hutchpp",
    "lanczos",
    "top_eigenvalues",
    "slq",
    "ModelHessian",
    "DataParallelHessian",
    "FiniteDifferenceHessian",
    "ShardedVectors",
    "causal_lm_token_loss",
    "TraceEstimate",
    "LanczosResult",
    "EigenResult",
    "SpectralDensity",
]
