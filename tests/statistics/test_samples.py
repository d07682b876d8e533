"""Trace-sample statistics, the Hutchinson variance formula (against Monte Carlo), and fits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from villani.statistics import intervals
from villani.statistics import samples as S


def test_sample_stats_hand_values():
    st = S.sample_stats([1.0, 2.0, 3.0])
    # mean 2, std (ddof 1) = sqrt((1 + 0 + 1)/2) = 1, stderr = 1/√3, t(0.975, 2) = 4.302652729911275
    assert st.n == 3 and st.mean == 2.0 and st.std == pytest.approx(1.0)
    assert st.stderr == pytest.approx(1 / math.sqrt(3))
    half = 4.302652729911275 / math.sqrt(3)
    assert st.ci95 == pytest.approx((2.0 - half, 2.0 + half))
    assert st.cv == pytest.approx(0.5) and st.rel_stderr == pytest.approx(0.5 / math.sqrt(3))
    assert st.shapiro_p == pytest.approx(1.0)  # three equally spaced points are perfectly "normal"
    d = st.to_dict()
    assert d["ci95"] == [pytest.approx(2.0 - half), pytest.approx(2.0 + half)] and d["n"] == 3


def test_sample_stats_undefined_cases():
    one = S.sample_stats([5.0])
    assert one.std is None and one.stderr is None and one.ci95 is None and one.cv is None
    assert one.shapiro_p is None and one.to_dict()["ci95"] is None
    zero_mean = S.sample_stats([-1.0, 1.0, -2.0, 2.0])
    assert zero_mean.cv is None and zero_mean.rel_stderr is None
    assert S.sample_stats([3.0, 3.0, 3.0, 3.0]).shapiro_p is None
    with pytest.raises(ValueError):
        S.sample_stats([])
    with pytest.raises(ValueError):
        S.sample_stats([1.0, math.nan])


def test_t_interval_coverage_normal_samples():
    rng = np.random.default_rng(0)
    trials, n, mu = 4000, 8, 3.0
    hits = 0
    for _ in range(trials):
        lo, hi = S.t_interval(rng.normal(mu, 2.0, size=n))
        hits += lo <= mu <= hi
    # binomial s.d. of the coverage: sqrt(.95·.05/4000) ≈ 0.0034; allow 4 s.d.
    assert abs(hits / trials - 0.95) < 0.014


def test_shapiro_separates_normal_from_skewed():
    rng = np.random.default_rng(1)
    assert S.shapiro_p(rng.normal(size=64)) > 0.01
    assert S.shapiro_p(rng.exponential(size=200)) < 1e-4


def _sym(rng, n, shift=0.0):
    a = rng.normal(size=(n, n))
    return (a + a.T) / 2 + shift * np.eye(n)


def test_hutchinson_variance_matches_monte_carlo():
    rng = np.random.default_rng(2)
    A = _sym(rng, 24, shift=0.7)
    frob, diag = float(np.sum(A * A)), float(np.sum(np.diag(A) ** 2))
    K = 200_000
    V = rng.choice([-1.0, 1.0], size=(K, 24))
    rad = np.einsum("ki,ij,kj->k", V, A, V)
    G = rng.normal(size=(K, 24))
    gau = np.einsum("ki,ij,kj->k", G, A, G)
    # unbiased, and Var = 2(‖A‖_F² − ΣA_ii²) for Rademacher, 2‖A‖_F² for Gaussian
    assert rad.mean() == pytest.approx(np.trace(A), abs=4 * math.sqrt(S.hutchinson_variance(frob, diag) / K))
    assert rad.var() == pytest.approx(S.hutchinson_variance(frob, diag), rel=0.02)
    assert gau.var() == pytest.approx(S.hutchinson_variance(frob), rel=0.03)
    assert S.hutchinson_variance(frob) >= S.hutchinson_variance(frob, diag)


def test_rademacher_samples_shift_exactly_with_lam_identity():
    # vᵀ(H + λI)v = vᵀHv + λd for Rademacher v: same variance; the exact formula is shift-invariant
    rng = np.random.default_rng(3)
    H, lam, d = _sym(rng, 10), 0.3, 10
    V = rng.choice([-1.0, 1.0], size=(50, d))
    s_H = np.einsum("ki,ij,kj->k", V, H, V)
    s_F = np.einsum("ki,ij,kj->k", V, H + lam * np.eye(d), V)
    np.testing.assert_allclose(s_F, s_H + lam * d, rtol=1e-12)
    HF = H + lam * np.eye(d)
    exact_H = S.hutchinson_variance(np.sum(H * H), np.sum(np.diag(H) ** 2))
    exact_F = S.hutchinson_variance(np.sum(HF * HF), np.sum(np.diag(HF) ** 2))
    assert exact_F == pytest.approx(exact_H)


def test_predicted_cv_matches_monte_carlo_of_m_probe_means():
    rng = np.random.default_rng(4)
    d, M, K = 30, 16, 20_000
    A = _sym(rng, d, shift=1.5)
    frob, diag, tr = float(np.sum(A * A)), float(np.sum(np.diag(A) ** 2)), float(np.trace(A))
    V = rng.choice([-1.0, 1.0], size=(K, M, d))
    means = np.einsum("kmi,ij,kmj->km", V, A, V).mean(axis=1)
    assert means.std() / abs(means.mean()) == pytest.approx(S.predicted_cv(frob, tr, M, diag), rel=0.03)
    # the bound without the diagonal term is larger
    assert S.predicted_cv(frob, tr, M) > S.predicted_cv(frob, tr, M, diag)
    # hand value: sqrt(2·8)/(√4·2) = 1
    assert S.predicted_cv(8.0, 2.0, 4) == pytest.approx(1.0)
    assert S.predicted_cv(8.0, 0.0, 4) is None
    assert S.predicted_cv(1.0, 1.0, 1, diag_sq=1.5) == 0.0  # noisy frob estimate below diag: clipped


def test_fit_slope_linear_largest_radii():
    # Ψ-like: Ψ = λ²x − C − c·√x, c = 0.05, slope at large x → λ² (the √x term fades)
    lam = 1e-2
    x = np.logspace(2, 9, 40)
    y = lam**2 * x - 1e3 - 0.05 * np.sqrt(x)
    fit = S.fit_slope(x, y, largest=8)
    assert fit.n == 8 and fit.x_min == pytest.approx(x[-8])
    assert fit.slope == pytest.approx(lam**2, rel=0.05)
    assert fit.r2 > 0.999
    assert S.fit_slope(x, y, x_min=1e8).n == int(np.sum(x >= 1e8))


def test_fit_slope_noisy_recovers_slope_with_stderr():
    rng = np.random.default_rng(5)
    x = np.linspace(0, 10, 200)
    y = 3.0 * x + 1.0 + rng.normal(0, 0.5, size=x.size)
    fit = S.fit_slope(x, y)
    assert abs(fit.slope - 3.0) < 4 * fit.stderr_slope
    assert fit.intercept == pytest.approx(1.0, abs=0.3)
    ref = sps.linregress(x, y)
    assert fit.r2 == pytest.approx(ref.rvalue**2)


def test_fit_slope_loglog_exponent():
    x = np.logspace(0, 4, 20)
    fit = S.fit_slope(x, 3.0 * x**2, space="loglog")
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(math.log10(3.0))
    assert fit.r2 == pytest.approx(1.0)


def test_within_slope_is_the_exponent_inside_clusters_whatever_differs_between_them():
    """y = 2·x + 5·(cluster level) with the level anti-correlated with x between clusters: the
    pooled slope is negative, the within-cluster slope is the 2 every cluster has."""
    rng = np.random.default_rng(0)
    cl = np.repeat(np.arange(6), 5)
    level = np.repeat(np.arange(6.0), 5)
    x = rng.normal(size=cl.size) * 0.1 - 2.0 * level
    y = 2.0 * x + 5.0 * level + rng.normal(size=cl.size) * 1e-3
    assert np.polyfit(x, y, 1)[0] < 0
    assert S.within_slope(x, y, cl) == pytest.approx(2.0, abs=0.02)
    # by hand: each cluster's means removed, one line through the origin
    dx = x - np.repeat([x[cl == c].mean() for c in range(6)], 5)
    dy = y - np.repeat([y[cl == c].mean() for c in range(6)], 5)
    assert S.within_slope(x, y, cl) == pytest.approx(float(dx @ dy / (dx @ dx)), rel=1e-12)


def test_within_slope_undefined_without_variation_or_degrees_of_freedom():
    assert S.within_slope([1.0, 1.0, 2.0, 2.0], [0.0, 1.0, 0.0, 1.0], [0, 0, 1, 1]) is None  # x constant in each
    assert S.within_slope([0.0, 1.0, 5.0], [0.0, 1.0, 9.0], [0, 0, 1]) is None  # 3 points − 2 clusters = 1
    assert S.within_slope([0.0, 1.0, 2.0, np.nan], [0.0, 2.0, 4.0, 1.0], [0, 0, 0, 0]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="differ in length"):
        S.within_slope([0.0, 1.0], [0.0], [0, 0])


def test_fit_slope_errors():
    with pytest.raises(ValueError):
        S.fit_slope([1.0, 2.0, 3.0], [-1.0, 2.0, 3.0], space="loglog")
    with pytest.raises(ValueError):
        S.fit_slope([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], x_min=2.5)  # one point left
    with pytest.raises(ValueError):
        S.fit_slope([1.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        S.fit_slope([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        S.fit_slope([1.0, 2.0], [1.0, 2.0], space="semilog")
    two = S.fit_slope([1.0, 2.0], [1.0, 3.0])
    assert two.slope == pytest.approx(2.0) and two.stderr_slope is None


def test_r_squared():
    assert S.r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 4.0]) == pytest.approx(0.5)  # 1 − 1/2
    assert S.r_squared([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert S.r_squared([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-3.0)  # 1 − 8/2
    assert S.r_squared([2.0, 2.0], [1.0, 3.0]) is None


def test_fit_cost_model_recovers_affine_cost_exactly():
    d = np.array([4.4e4, 1.4e5, 4.7e5, 1.7e6])
    fit = S.fit_cost_model(d, 0.03 + 2e-7 * d)
    assert fit.fixed == pytest.approx(0.03, rel=1e-9)
    assert fit.per_unit == pytest.approx(2e-7, rel=1e-9)
    assert fit.max_rel_residual < 1e-9
    assert fit(1e9) == pytest.approx(0.03 + 200.0)


def test_fit_cost_model_keeps_both_terms_non_negative():
    # a cost that falls with size cannot have a negative per-parameter term
    fit = S.fit_cost_model([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert fit.per_unit == 0.0 and fit.fixed > 0
    # pure proportional cost: the overhead is clamped at zero, not negative
    fit = S.fit_cost_model([1.0, 2.0, 4.0], [1.9, 4.1, 8.0])
    assert fit.fixed >= 0.0 and fit.per_unit == pytest.approx(2.0, rel=0.05)


def test_fit_cost_model_needs_two_distinct_sizes():
    with pytest.raises(ValueError, match="at least 2 distinct"):
        S.fit_cost_model([5.0, 5.0], [1.0, 2.0])


def test_run_correlations_by_hand_equal_scipy_per_run():
    """``intervals.run_correlations`` is kept by hand (grouped sums, every run at once, for the
    coverage test's 10⁴ runs): it gives scipy's ``pearsonr`` / ``spearmanr`` of every run (not bit
    for bit: ≤ 1e-12 apart)."""
    from villani.statistics.intervals import run_correlations

    rng = np.random.default_rng(7)
    runs, per = 300, 12
    x = rng.lognormal(size=runs * per)
    y = x * rng.uniform(-2, 2, size=runs).repeat(per) + rng.normal(size=runs * per)
    y[::5] = np.round(y[::5])  # ties for the ranks
    g = np.arange(runs).repeat(per)

    def by_scipy(rank: bool) -> np.ndarray:
        f = sps.spearmanr if rank else sps.pearsonr
        return np.array([f(x[g == j], y[g == j]).statistic for j in range(runs)])

    for rank in (False, True):
        np.testing.assert_allclose(run_correlations(x, y, g, rank=rank), by_scipy(rank), rtol=0, atol=1e-12)


@pytest.mark.parametrize("confidence", [0.9, 0.95, 1 - 0.05 / 30])
def test_seed_and_combination_intervals_equal_scipy_t_interval(confidence):
    """The intervals take the t quantile from ``scipy.special.stdtrit`` (no per-call overhead):
    the same numbers as ``scipy.stats.t.interval``."""
    rng = np.random.default_rng(3)
    for k in (2, 3, 5, 30):
        v = rng.lognormal(size=k)
        iv = intervals.seed_interval(v, confidence)
        lo, hi = sps.t.interval(confidence, k - 1, loc=v.mean(), scale=v.std(ddof=1) / math.sqrt(k))
        assert (iv.low, iv.high) == pytest.approx((lo, hi), rel=1e-12)
        g = intervals.seed_interval(v, confidence, scale="log")
        lo, hi = sps.t.interval(confidence, k - 1, loc=np.log(v).mean(), scale=np.log(v).std(ddof=1) / math.sqrt(k))
        with np.errstate(over="ignore"):
            want = (np.exp(lo), np.exp(np.log(v).mean()), np.exp(hi))
        assert (g.low, g.estimate, g.high) == pytest.approx(want, rel=1e-12)
    iv = intervals.combination_interval(2.0, [1.0, -1.0], [0.3, 0.4], [3.0, 7.0], confidence)
    dof = 0.25**2 / (0.3**4 / 3 + 0.4**4 / 7)
    assert (iv.low, iv.high) == pytest.approx(sps.t.interval(confidence, dof, loc=2.0, scale=0.5), rel=1e-12)


def test_log_scale_interval_inverts_with_the_ratio_and_refuses_non_positive_values():
    v = np.array([170.0, 39.8, 46.2])
    a, b = intervals.seed_interval(v, scale="log"), intervals.seed_interval(1 / v, scale="log")
    assert (a.low, a.estimate, a.high) == pytest.approx((1 / b.high, 1 / b.estimate, 1 / b.low), rel=1e-12)
    assert intervals.seed_interval([2.0, 2.0], scale="log").low is None
    with pytest.raises(ValueError, match="values > 0"):
        intervals.seed_interval([1.0, -1.0], scale="log")
    with pytest.raises(ValueError, match="scale must be"):
        intervals.seed_interval([1.0, 2.0], scale="sqrt")


def test_probe_combination_interval_is_the_t_interval_of_per_probe_combinations():
    samples = np.array([[1.0, 2.0, 4.0], [0.5, 2.5, 3.0], [1.5, 1.0, 5.0], [1.0, 2.0, 3.5]])
    w = np.array([-0.5, 0.0, 0.5])
    iv = intervals.probe_combination_interval(samples, w)
    ref = intervals.seed_interval(samples @ w)
    assert (iv.estimate, iv.low, iv.high, iv.units, iv.dof) == (ref.estimate, ref.low, ref.high, 4, 3)
    assert iv.estimate == pytest.approx(w @ samples.mean(0))
    with pytest.raises(ValueError, match="one coefficient per point"):
        intervals.probe_combination_interval(samples, w[:2])


def test_run_proportion_interval_counts_runs_that_hold_at_every_checkpoint():
    ok = [True, True, True, False, True, True, True, True, True]
    iv = intervals.run_proportion_interval(ok, [0, 0, 0, 1, 1, 1, 2, 2, 2])
    ref = intervals.proportion_interval(2, 3)
    assert (iv.estimate, iv.low, iv.high, iv.units, iv.n) == (2 / 3, ref.low, ref.high, 3, 9)


def test_simpson_decomposition_splits_the_pooled_r_exactly():
    """Pooled r = within-strata part + between-strata part; r_within is the r of the deviations
    from the strata's means, r_between the n-weighted r of the means (Fig 7 pooled over λ)."""
    from villani.statistics.samples import simpson_decomposition

    rng = np.random.default_rng(4)
    g = np.repeat([0, 1, 2], [5, 7, 9])
    x = rng.normal(size=g.size) - 50.0 * g          # −λd: each stratum shifted down
    y = 0.8 * x + 200.0 * g + rng.normal(size=g.size)  # within: y rises with x; between: falls
    d = simpson_decomposition(x, y, g)
    assert d.pooled == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert d.within + d.between == pytest.approx(d.pooled)
    dev = [v - np.array([v[g == k].mean() for k in range(3)])[g] for v in (x, y)]
    assert d.r_within == pytest.approx(np.corrcoef(*dev)[0, 1]) and d.r_within > 0.5
    assert d.pooled < 0 and d.between < 0 < d.within and d.r_between == pytest.approx(-1.0, abs=1e-3)
    assert d.x_between_share > 0.99
