"""Curvature engine: symmetric linear operators and free-function estimators, in folders
by quantity.

- :mod:`.operators` — operators are anything with ``dim`` and ``matvec(v)``
  (:mod:`.operators.linear`); the model Hessians share the base class
  :class:`HessianOperator`;
- :mod:`.trace` — :func:`hutchinson` (optionally deflated, optionally stopped at a CI
  target), :func:`hutchpp`, :func:`doubly_stochastic_trace`;
- :mod:`.spectrum` — :func:`lanczos`, :func:`top_eigenvalues`, :func:`slq`;
- :mod:`.probes` — the seeded Rademacher probes every estimator draws.

The estimators need only ``dim`` and ``matvec``. :class:`ModelHessian`
is the Hessian of a causal LM's regularised token loss. Across processes, with vectors
sharded (:class:`ShardedVectors`): :class:`DataParallelHessian` (exact, model
replicated) and :class:`FiniteDifferenceHessian` (central differences of FSDP2-sharded
gradients; also on one process). Numerics: ``docs/curvature.md``.
"""

from .operators.causal_lm_loss import causal_lm_token_loss
from .operators.data_parallel_hessian import DataParallelHessian
from .operators.finite_difference_hessian import FiniteDifferenceHessian
from .operators.hessian import HessianOperator
from .operators.linear import CallableOperator, DenseOperator, LinearOperator, ShiftedOperator, as_operator
from .operators.model_hessian import ModelHessian
from .operators.vectors import ShardedVectors
from .spectrum.density import SpectralDensity
from .spectrum.lanczos import lanczos, top_eigenvalues
from .spectrum.ritz import EigenResult, LanczosResult
from .spectrum.slq import slq, slq_num_starts
from .trace.deflated_hutchinson import Deflation, deflation_from_lanczos, deflation_from_products
from .trace.doubly_stochastic import DoublyStochasticTrace, doubly_stochastic_trace
from .trace.estimate import TraceEstimate
from .trace.hutchinson import hutchinson
from .trace.hutchpp import hutchpp
from .trace.two_stage import CITarget

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
    "doubly_stochastic_trace",
    "DoublyStochasticTrace",
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
