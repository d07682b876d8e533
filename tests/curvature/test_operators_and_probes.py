"""The operator protocol and the seeded probe stream."""

import pytest
import torch

from villani.curvature import (
    CallableOperator,
    DenseOperator,
    LinearOperator,
    as_operator,
    hutchinson,
)
from villani.curvature.operators.linear import apply_rows
from villani.curvature.probes import ProbeStream, rademacher_rows


def test_dense_operator_matvec_and_matmat(general_matrix):
    op = DenseOperator(general_matrix)
    V = torch.randn(3, op.dim, dtype=torch.float64)
    assert isinstance(op, LinearOperator)
    torch.testing.assert_close(op.matvec(V[0]), general_matrix @ V[0])
    torch.testing.assert_close(op.matmat(V), (general_matrix @ V.T).T)


def test_dense_operator_rejects_nonsymmetric():
    with pytest.raises(ValueError, match="symmetric"):
        DenseOperator(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        DenseOperator(torch.ones(2, 3))


def test_as_operator_accepts_callable_pair_and_tensor(general_matrix):
    fn = lambda v: general_matrix @ v  # noqa: E731
    for op in (as_operator(fn, 60, dtype=torch.float64), as_operator((fn, 60)), as_operator(general_matrix)):
        assert op.dim == 60
        v = torch.ones(60, dtype=torch.float64)
        torch.testing.assert_close(op.matvec(v), general_matrix @ v)
    with pytest.raises(TypeError, match="dimension"):
        as_operator(fn)
    with pytest.raises(TypeError):
        as_operator(3)


def test_callable_pair_runs_estimators_like_dense(general_matrix):
    """A (callable, dim) pair and the dense operator give bit-identical estimates."""
    fn = lambda v: general_matrix @ v  # noqa: E731
    a = hutchinson(CallableOperator(fn, 60, dtype=torch.float64), 8, seed=4)
    b = hutchinson(DenseOperator(general_matrix), 8, seed=4)
    assert a.samples.tolist() == b.samples.tolist()


def test_apply_rows_uses_matvec_without_matmat(general_matrix):
    calls = []

    class OnlyMatvec:
        dim, dtype = 60, torch.float64

        def matvec(self, v):
            calls.append(1)
            return general_matrix @ v

    V = torch.randn(4, 60, dtype=torch.float64)
    torch.testing.assert_close(apply_rows(OnlyMatvec(), V), V @ general_matrix)
    assert len(calls) == 4


def test_probes_are_rademacher_and_reproducible():
    a = rademacher_rows(5, 1000, seed=7)
    b = rademacher_rows(5, 1000, seed=7)
    c = rademacher_rows(5, 1000, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert set(a.unique().tolist()) == {-1.0, 1.0}
    assert torch.all(a.square().sum(dim=1) == 1000)
    # balanced signs: |mean| within 5 standard deviations of 0
    assert abs(float(a.mean())) < 5 / (5000**0.5)


def test_probe_chunking_does_not_change_probes():
    whole = ProbeStream(50, 3, dtype=torch.float64, device=torch.device("cpu")).next(7)
    chunks = torch.cat(list(ProbeStream(50, 3, dtype=torch.float32, device=torch.device("cpu")).chunks(7, 3)))
    assert torch.equal(whole.float(), chunks)


def test_shifted_operator_is_a_plus_sigma_i(general_matrix):
    from villani.curvature import ShiftedOperator, top_eigenvalues

    A = general_matrix
    op = ShiftedOperator(A, 2.5)
    V = rademacher_rows(3, A.shape[0], 0, dtype=A.dtype)
    expected = V @ (A + 2.5 * torch.eye(A.shape[0], dtype=A.dtype))
    torch.testing.assert_close(op.matmat(V), expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(op.matvec(V[0]), expected[0], rtol=1e-12, atol=1e-12)
    assert (op.dim, op.dtype) == (A.shape[0], A.dtype)
    top_a = top_eigenvalues(A, 3, num_steps=60, seed=1).values
    top_s = top_eigenvalues(op, 3, num_steps=60, seed=1).values
    torch.testing.assert_close(torch.as_tensor(top_s), torch.as_tensor(top_a + 2.5), rtol=1e-10, atol=1e-10)
