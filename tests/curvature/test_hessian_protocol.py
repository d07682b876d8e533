"""Every model Hessian satisfies the HessianOperator protocol, with its signatures."""

import inspect
import typing

import pytest
import torch
import torch.distributed as dist

from villani.curvature import (
    DataParallelHessian,
    FiniteDifferenceHessian,
    HessianOperator,
    LinearOperator,
    ModelHessian,
    hutchinson,
)

from .cases import tiny_causal_lm, token_batches

METHODS = [n for n, v in vars(HessianOperator).items() if inspect.isfunction(v) and not n.startswith("_")]
ATTRIBUTES = list(typing.get_type_hints(HessianOperator))


def _method_params(fn) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values()]


@pytest.fixture(scope="module")
def single_process_group(tmp_path_factory):
    """A one-process gloo group, as DataParallelHessian needs torch.distributed."""
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    init = tmp_path_factory.mktemp("dist") / "init"
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("cls", [ModelHessian, DataParallelHessian, FiniteDifferenceHessian])
def test_classes_implement_every_member_with_the_protocol_signature(cls):
    assert len(METHODS) == 11 and {"dim", "names", "num_tokens", "lam"} <= set(ATTRIBUTES)
    for name in METHODS:
        assert _method_params(getattr(cls, name)) == _method_params(getattr(HessianOperator, name)), (cls, name)


def test_instances_satisfy_the_protocol_and_agree(single_process_group):
    batches = token_batches()  # one model each (the same θ): finite differences move θ in place
    ops = [cls(tiny_causal_lm("gpt2"), batches, lam=0.3)  # GPT-2: float64 throughout (GPT-Neo: fp32 QKᵀ)
           for cls in (ModelHessian, DataParallelHessian, FiniteDifferenceHessian)]
    v = torch.randn(ops[0].dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for op in ops:
        assert isinstance(op, HessianOperator) and isinstance(op, LinearOperator), type(op)
        for name in ATTRIBUTES:
            assert hasattr(op, name), (type(op), name)
        assert (op.dim, op.names, op.num_tokens, op.lam) == (ops[0].dim, ops[0].names, ops[0].num_tokens, 0.3)
        assert op.loss() == pytest.approx(ops[0].loss(), rel=1e-10)
        # exact products agree to round-off; central differences to O(h²)
        tol = 1e-10 if not isinstance(op, FiniteDifferenceHessian) else 1e-5
        hv, ref = op.matvec(v), ops[0].matvec(v)
        assert float(torch.linalg.vector_norm(hv - ref) / torch.linalg.vector_norm(ref)) < tol, type(op)
        assert hutchinson(op, 2, seed=0).num_probes == 2
        op.release()
    assert not isinstance(torch.eye(3), HessianOperator)
