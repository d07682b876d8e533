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
is the Hessian of a causal LM's regularised token loss; its ``objective()`` (an
:class:`Objective`) gives F and ∇F with its λ inside (:func:`regularised_loss`, the one
formula of F), its ``data_hessian()`` ∇²L alone (:class:`DataHessian`). Across processes, with vectors
sharded (:class:`ShardedVectors`): :class:`DataParallelHessian` (exact, model
replicated) and :class:`FiniteDifferenceHessian` (central differences of FSDP2-sharded
gradients; also on one process). Numerics: ``docs/curvature.md``.

A public name is imported from its module on first use (PEP 562), so importing one module
of the engine — e.g. :mod:`.spectrum.density`, which a job's budget reads before anything
runs — imports neither torch nor the rest of the engine.
"""

from importlib import import_module

#: Each public name and the module of this package that defines it.
HOMES = {
    "LinearOperator": ".operators.linear",
    "DenseOperator": ".operators.linear",
    "CallableOperator": ".operators.linear",
    "ShiftedOperator": ".operators.linear",
    "as_operator": ".operators.linear",
    "HessianOperator": ".operators.hessian",
    "DataHessian": ".operators.hessian",
    "Objective": ".operators.objective",
    "regularised_loss": ".operators.objective",
    "ModelHessian": ".operators.model_hessian",
    "DataParallelHessian": ".operators.data_parallel_hessian",
    "FiniteDifferenceHessian": ".operators.finite_difference_hessian",
    "ShardedVectors": ".operators.vectors",
    "causal_lm_token_loss": ".operators.causal_lm_loss",
    "hutchinson": ".trace.hutchinson",
    "Deflation": ".trace.deflated_hutchinson",
    "deflation_from_lanczos": ".trace.deflated_hutchinson",
    "deflation_from_products": ".trace.deflated_hutchinson",
    "CITarget": ".trace.two_stage",
    "hutchpp": ".trace.hutchpp",
    "doubly_stochastic_trace": ".trace.doubly_stochastic",
    "DoublyStochasticTrace": ".trace.doubly_stochastic",
    "TraceEstimate": ".trace.estimate",
    "lanczos": ".spectrum.lanczos",
    "top_eigenvalues": ".spectrum.lanczos",
    "slq": ".spectrum.slq",
    "slq_num_starts": ".spectrum.density",
    "LanczosResult": ".spectrum.ritz",
    "EigenResult": ".spectrum.ritz",
    "SpectralDensity": ".spectrum.density",
}

__all__ = list(HOMES)


def __getattr__(name: str):
    if name not in HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(HOMES[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
