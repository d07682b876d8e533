"""Lanczos with full re-orthogonalisation, top eigenvalues and Ritz residuals."""

import numpy as np
import pytest
import torch

from villani.curvature import DenseOperator, lanczos, top_eigenvalues

from .cases import matrix_with_spectrum


def test_top_eigenvalues_well_separated(separated):
    A, eig = separated
    res = top_eigenvalues(DenseOperator(A), 10, num_steps=120, seed=0)
    np.testing.assert_allclose(res.values, eig[:10], rtol=1e-8)
    assert np.all(np.diff(res.values) < 0)
    assert res.num_matvecs == 120
    assert np.all(res.residuals < 1e-6)


def test_ritz_residual_bounds_the_error(separated):
    """Each Ritz value lies within its residual of some eigenvalue (also when unconverged)."""
    A, eig = separated
    res = top_eigenvalues(A, 10, num_steps=12, seed=1)
    dist = np.min(np.abs(res.values[:, None] - eig[None, :]), axis=1)
    assert np.all(dist <= res.residuals * (1 + 1e-8) + 1e-10)
    assert res.residuals.max() > 1e-6  # at 12 steps not everything has converged


def test_ritz_vectors_are_eigenvectors(separated):
    A, eig = separated
    res = top_eigenvalues(A, 3, num_steps=80, seed=2, return_vectors=True)
    for value, vec in zip(res.values, res.vectors):
        assert float(torch.linalg.vector_norm(A @ vec - value * vec)) < 1e-7
        assert float(torch.linalg.vector_norm(vec)) == pytest.approx(1.0, abs=1e-10)


def test_basis_orthonormal_and_tridiagonal_is_projection(general_matrix):
    res = lanczos(general_matrix, 30, seed=0, keep_basis=True)
    Q = res.basis
    np.testing.assert_allclose((Q @ Q.T).numpy(), np.eye(30), atol=1e-12)
    np.testing.assert_allclose((Q @ general_matrix @ Q.T).numpy(), res.tridiagonal(), atol=1e-10)
    assert res.alphas.shape == (30,) and res.betas.shape == (29,) and res.num_steps == 30


def test_v0_is_used_and_normalised(general_matrix):
    v0 = torch.arange(1.0, 61.0, dtype=torch.float64)
    res = lanczos(general_matrix, 3, v0=v0, keep_basis=True)
    u = v0 / v0.norm()
    torch.testing.assert_close(res.basis[0], u)
    assert res.alphas[0] == pytest.approx(float(u @ general_matrix @ u))


def test_full_reorthogonalisation_removes_ghosts():
    """Plain Lanczos finds converged outliers again (ghost copies); full reorth does not."""
    eig = np.concatenate([[100.0, 50.0], np.linspace(0.0, 1.0, 198)])
    A = matrix_with_spectrum(eig, seed=5)
    plain = lanczos(A, 150, seed=0, reorthogonalize=False)
    full = lanczos(A, 150, seed=0)
    near_top = lambda r: int(np.sum(np.abs(r.ritz()[0] - 100.0) < 1e-6))  # noqa: E731
    assert near_top(plain) >= 2
    assert near_top(full) == 1


def test_breakdown_on_invariant_subspace_stops_with_exact_values():
    A = torch.diag(torch.tensor([3.0, 2.0, 1.0, 7.0, 9.0], dtype=torch.float64))
    v0 = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    res = lanczos(A, 5, v0=v0)
    assert res.breakdown and res.num_steps == 3 and res.beta_last < 1e-12
    np.testing.assert_allclose(np.sort(res.ritz()[0]), [1.0, 2.0, 3.0], rtol=1e-12)


def test_restart_on_breakdown_finds_multiplicities():
    A = torch.diag(torch.tensor([5.0, 5.0, 5.0, 2.0, 1.0, 1.0], dtype=torch.float64))
    res = top_eigenvalues(A, 4, num_steps=6, seed=0)
    np.testing.assert_allclose(res.values, [5.0, 5.0, 5.0, 2.0], rtol=1e-12)


def test_offloaded_low_precision_basis(separated):
    A, eig = separated
    res = top_eigenvalues(A, 3, num_steps=60, seed=0, basis_device="cpu", basis_dtype=torch.float32)
    np.testing.assert_allclose(res.values, eig[:3], rtol=1e-5)


def test_arguments_checked(general_matrix):
    with pytest.raises(ValueError):
        top_eigenvalues(general_matrix, 5, num_steps=3)
    with pytest.raises(ValueError):
        lanczos(general_matrix, 0)
    with pytest.raises(ValueError):
        lanczos(general_matrix, 3, v0=torch.ones(5, dtype=torch.float64))
    assert lanczos(general_matrix, 500, seed=0).num_steps == 60  # capped at dim


def test_lanczos_reproducible(general_matrix):
    a, b = lanczos(general_matrix, 20, seed=9), lanczos(general_matrix, 20, seed=9)
    assert a.alphas.tolist() == b.alphas.tolist() and a.betas.tolist() == b.betas.tolist()


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-13), (torch.float32, 5e-6)])
def test_orthogonality_kept_after_outliers_converge(dtype, tol):
    """Plain Lanczos loses orthogonality once Ritz values converge; ours keeps QᵀQ = I."""
    eig = np.concatenate([[100.0, 50.0], np.linspace(0.0, 1.0, 398)])
    A = matrix_with_spectrum(eig, seed=5).to(dtype)
    Q = lanczos(A, 200, seed=0, keep_basis=True).basis
    assert float((Q @ Q.T - torch.eye(200, dtype=dtype)).abs().max()) < tol
