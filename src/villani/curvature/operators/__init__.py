r"""The operators: symmetric linear maps on flat vectors, given by their products.

- :mod:`.linear` — what an estimator needs of an operator (``dim`` + ``matvec``, the
  :class:`~.linear.LinearOperator` protocol), and the generic ones: dense, a callable,
  :math:`A + \sigma I`;
- :mod:`.vectors` — how vectors are laid out: whole, or sharded like FSDP2's parameters;
- :mod:`.hessian` — :class:`~.hessian.HessianOperator`, the base class of the model
  Hessians (layout, mask, regulariser, :math:`F` and :math:`\nabla F` written once);
- :mod:`.model_hessian`, :mod:`.data_parallel_hessian`, :mod:`.finite_difference_hessian`
  — its subclasses (exact; exact with vectors sharded; central differences);
- :mod:`.causal_lm_loss`, :mod:`.softmax_cross_entropy` — the token loss they differentiate;
  :mod:`.precision` — the arithmetic of products; :mod:`.device_timer` — build timing.
"""
