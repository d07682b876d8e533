"""Curvature engine: symmetric linear operators and free-function estimators.

Operators are anything with ``dim`` and ``matvec(v)`` (see :mod:`.operators`; the model
Hessians share the :class:`HessianOperator` protocol); the
estimators — :func:`hutchinson` (optionally deflated, optionally stopped at a CI
target), :func:`hutchpp`, :func:`lanczos`, :func:`top_eigenvalues`, :func:`slq` — need
only ``dim`` and ``matvec``. :class:`ModelHessian`
is the Hessian of a causal LM's regularised token loss. Across processes, with vectors
sharded (:class:`ShardedVectors`): :class:`DataParallelHessian` (exact, model
replicated) and :class:`FiniteDifferenceHessian` (central differences of FSDP2-sharded
gradients; also on one process). Numerics: ``docs/curvature.md``.
"""

from .causal_lm_loss import causal_lm_token_loss
from .data_parallel_hessian import DataParallelHessian
from .deflated_hutchinson import Deflation, deflation_from_lanczos, deflation_from_products
from .finite_difference_hessian import FiniteDifferenceHessian
from .hutchinson import hutchinson
from .lanczos import lanczos, top_eigenvalues
from .meyer2021hutchpp import hutchpp
from .model_hessian import ModelHessian
from .operators import (
    CallableOperator,
    DenseOperator,
    HessianOperator,
    LinearOperator,
    ShiftedOperator,
    as_operator,
)
from .results import EigenResult, LanczosResult, SpectralDensity, TraceEstimate
from .sharded_vectors import ShardedVectors
from .slq import slq, slq_num_starts
from .stein1945twostage import CITarget

__all__ = [
    "LinearOperator",
    "HessianOperator",
    "DenseOperator",
    "CallableOperator",
    "ShiftedOperator",
    "as_operator",
    "hutchinson",
    "Deflation",
    "deflation_from_lanczos",
    "deflation_from_products",
    "CITarget",
    "hutchpp",
    "lanczos",
    "top_eigenvalues",
    "slq",
    "slq_num_starts",
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
