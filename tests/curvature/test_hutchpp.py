"""Hutch++ (Meyer et al. 2021) against Hutchinson at equal matvecs."""

import numpy as np
import pytest
import torch

from villani.curvature import hutchinson, hutchpp


def test_hutchpp_is_unbiased(general_matrix):
    est = np.array([hutchpp(general_matrix, 12, seed=s, batch_size=4).mean for s in range(300)])
    se = est.std(ddof=1) / np.sqrt(est.size)
    assert abs(est.mean() - float(general_matrix.trace())) < 4 * se


def test_hutchpp_beats_hutchinson_on_low_rank_plus_noise(low_rank_plus_noise):
    A = low_rank_plus_noise
    tr = float(A.trace())
    err_pp = np.array([hutchpp(A, 60, seed=s, batch_size=20).mean - tr for s in range(40)])
    err_h = np.array([hutchinson(A, 60, seed=s, batch_size=20).mean - tr for s in range(40)])
    rms_pp, rms_h = np.sqrt(np.mean(err_pp**2)), np.sqrt(np.mean(err_h**2))
    assert rms_pp < 0.2 * rms_h, (rms_pp, rms_h)


def test_hutchpp_exact_for_rank_at_most_sketch():
    gen = torch.Generator().manual_seed(0)
    U = torch.randn(80, 4, generator=gen, dtype=torch.float64)
    A = U @ torch.diag(torch.tensor([5.0, -2.0, 3.0, 1.0], dtype=torch.float64)) @ U.T
    est = hutchpp(A, 15, seed=1)
    assert est.mean == pytest.approx(float(A.trace()), rel=1e-10)
    assert est.num_matvecs == 15 and est.method == "hutch++" and est.samples.size == 5


def test_hutchpp_reproducible_and_needs_three_matvecs(general_matrix):
    a, b = hutchpp(general_matrix, 9, seed=3), hutchpp(general_matrix, 9, seed=3)
    assert a.samples.tolist() == b.samples.tolist()
    with pytest.raises(ValueError):
        hutchpp(general_matrix, 2)
