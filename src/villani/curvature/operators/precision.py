r"""The arithmetic precision of Hessian-vector products: one home for what each name means.

The products of a float32 model (vectors, parameters and results stay float32; the
estimators accumulate in float64 as always) can run their matrix products at

- ``"highest"``: fp32 throughout, ``torch.set_float32_matmul_precision("highest")`` (no
  TF32) — what every product did before ``measure.precision`` existed;
- ``"tf32"``: matmul precision ``"high"``: on a CUDA device of compute capability ≥ 8.0
  the fp32 matmuls run on TF32 tensor cores (10-bit mantissa operands, fp32
  accumulation); elsewhere — the CPU, older GPUs — it changes nothing and the products
  are exactly ``"highest"``'s (:func:`effective_precision` says which);
- ``"bf16"``: ``torch.autocast(device_type, dtype=torch.bfloat16)`` around the forward
  and gradient graph of the product, as training runs: matmuls on bf16-rounded operands
  (8-bit mantissa), reductions such as softmax and cross-entropy in fp32 (autocast's
  policy); the closed-form output layer and cross-entropy of
  :mod:`.softmax_cross_entropy` round their own matmul operands the same way (``low``).

On an A100 the dense peaks are 19.5 (fp32), 156 (TF32) and 312 (bf16) TFLOP/s
(:data:`villani.measure.cost_model.A100_PEAK_TFLOPS`): a product at ``"highest"`` costs
≈ 16× what it would at training precision. Whether the cheaper ones are accurate enough
is measured per job (:mod:`villani.measure.precision_audit`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["PRECISIONS", "product_precision", "effective_precision", "autocast_dtype", "check_precision"]

PRECISIONS = ("highest", "tf32", "bf16")
_MATMUL = {"highest": "highest", "tf32": "high", "bf16": "highest"}


def check_precision(precision: str) -> str:
    """``precision`` if it is one of :data:`PRECISIONS`, else a one-line ValueError."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is invalid (allowed: {', '.join(PRECISIONS)})")
    return precision


def effective_precision(precision: str, device: torch.device | str) -> str:
    """What products asked for at ``precision`` are really computed in on ``device``:
    ``"tf32"`` is ``"highest"`` where there are no TF32 units (CPU, CUDA before sm_80)."""
    device = torch.device(device)
    if check_precision(precision) == "tf32":
        if device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 8:
            return "highest"
    return precision


@contextlib.contextmanager
def product_precision(precision: str, device: torch.device | str) -> Iterator[None]:
    """Run the enclosed products at ``precision`` on ``device`` (the matmul precision is
    restored afterwards; autocast only for ``"bf16"``)."""
    device = torch.device(device)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(_MATMUL[check_precision(precision)])
    try:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            yield
    finally:
        torch.set_float32_matmul_precision(previous)


def autocast_dtype(device: torch.device | str) -> torch.dtype | None:
    """The dtype autocast rounds matmul operands to on ``device`` now, or None when it is off."""
    kind = torch.device(device).type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None
