"""Every model Hessian is a HessianOperator: the members the base class writes once are not
written again by a subclass, each subclass writes the data term, and the three agree."""

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
# what a subclass writes (the data term L, its loss, gradient and products; its tensors)
HOOKS = {"_data_matmat", "_local_tensors", "data_loss", "data_grad", "release"}


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
def test_classes_share_the_base_class_and_write_only_the_data_term(cls):
    assert issubclass(cls, HessianOperator)
    assert len(METHODS) == 13 and {"objective", "data_hessian"} <= set(METHODS)
    assert {"dim", "names", "num_tokens", "lam"} <= set(ATTRIBUTES)
    written = {n for n, v in vars(cls).items() if inspect.isfunction(v) and n in set(METHODS) | HOOKS}
    assert {"_data_matmat", "_local_tensors", "data_loss", "data_grad"} <= written <= HOOKS, (cls, written)
    for name in METHODS:
        assert _method_params(getattr(cls, name)) == _method_params(getattr(HessianOperator, name)), (cls, name)


def test_the_base_class_alone_has_no_data_term():
    with pytest.raises(NotImplementedError):
        HessianOperator()._data_matmat(torch.zeros(1, 3))


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
        obj, ref_obj = op.objective(), ops[0].objective()  # F and ∇F written once: the same on every layout
        assert obj.F == pytest.approx(op.loss(), rel=1e-12) and obj.lam == 0.3
        assert obj.grad_F_sq == pytest.approx(ref_obj.grad_F_sq, rel=1e-10)
        assert obj.theta_dot_grad_L == pytest.approx(ref_obj.theta_dot_grad_L, rel=1e-10)
        # exact products agree to round-off; central differences to O(h²)
        tol = 1e-10 if not isinstance(op, FiniteDifferenceHessian) else 1e-5
        hv, ref, applied = op.matvec(v), ops[0].matvec(v), op.products
        assert float(torch.linalg.vector_norm(hv - ref) / torch.linalg.vector_norm(ref)) < tol, type(op)
        assert hutchinson(op, 2, seed=0).num_probes == 2
        assert op.products == applied + 2  # the base class counts every row it applied
        # ∇²L is the same operator less λI (all parameters decayed), its products counted with F's
        assert float(torch.linalg.vector_norm(op.data_hessian().matvec(v) + 0.3 * v - hv)) <= 1e-12 * float(
            torch.linalg.vector_norm(hv))
        assert op.products == applied + 3
        assert torch.equal(op.decay_mask(), torch.ones(op.dim, dtype=op.dtype))
        assert op.theta_sq_norm() == ops[0].theta_sq_norm()  # one formula, one process: the same sum
        op.release()
    assert not isinstance(torch.eye(3), HessianOperator)
