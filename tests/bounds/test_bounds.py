"""Bounds of section V against hand-computed values, and their undefined/clamped/vacuous cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from villani.diagnostics import psi
from villani.bounds import table as T
from villani.bounds import pac_bayes as PB
from villani.bounds import theory as B

# --------------------------------------------------------------------------- C_LS, C_P


def test_c_ls_hand_values():
    # (s/λ)(1 + d/(λ s)): λ = 1e-2, d = 1e4, s = 1 → 100 · (1 + 1e6) = 100000100
    assert B.c_ls_upper(1e-2, 1e4) == pytest.approx(100_000_100.0, rel=1e-14)
    # λ = 0.5, d = 3, s = 2 → (2/0.5)(1 + 3/1) = 4 · 4 = 16
    assert B.c_ls_upper(0.5, 3.0, s=2.0) == pytest.approx(16.0)
    # the paper's own numbers: λ = 1e-3, d = 1.25e8, s = 1 → 1e3 + 1.25e8/1e-6 = 1.25e14 + 1e3
    assert B.c_ls_upper(1e-3, 1.25e8) == pytest.approx(1.25e14 + 1e3, rel=1e-12)


def test_c_p_is_the_c_ls_bound():
    assert B.c_p_upper(0.5, 3.0, s=2.0) == B.c_ls_upper(0.5, 3.0, s=2.0)


def test_c_ls_vectorised_over_d_for_fig10():
    d = np.array([1e8, 1e10, 1e12])
    got = B.c_ls_upper(1e-2, d)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, 100.0 + d / 1e-4, rtol=1e-14)


def test_c_ls_decreases_with_lam_and_grows_with_d():
    lams = np.logspace(-5, 1, 25)
    values = [B.c_ls_upper(x, 1e6) for x in lams]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert B.c_ls_upper(1e-3, 2e6) > B.c_ls_upper(1e-3, 1e6)


def test_c_ls_gibbs_is_lam_times_c_ls():
    # β = 1/λ: C_LS(βF) = λ · C_LS(F) = s + d/λ; λ = 0.5, d = 3, s = 2 → 2 + 6 = 8
    assert B.c_ls_gibbs(0.5, 3.0, s=2.0) == pytest.approx(8.0)
    # explicit β = 4: 16 / 4
    assert B.c_ls_gibbs(0.5, 3.0, s=2.0, beta=4.0) == pytest.approx(4.0)


# --------------------------------------------------------------------------- Theorem 2


def test_eta_max_hand_values():
    assert B.eta_max(1e-3, 0.5) == pytest.approx(5e-4)  # 1e-3 / (4 · 0.5)
    assert B.eta_max(8.0, 1.0) == 1.0  # min(1, 8/4 = 2)
    assert B.eta_max(1e-3, 0.0) == 1.0  # no noise: only η ≤ 1 remains


def test_steps_required_hand_values():
    # C/(2η) · log(k·gap/ε): C = 100, η = 0.5, gap = e, ε = 2
    # proof form (k = 2): 100 · log(e) = 100; eq. (33) (k = 1): 100 · (1 − log 2)
    assert B.steps_required(100.0, 0.5, math.e, 2.0) == pytest.approx(100.0)
    assert B.steps_required(100.0, 0.5, math.e, 2.0, eps_split=False) == pytest.approx(100.0 * (1 - math.log(2)))
    # already within ε: 0, not negative
    assert B.steps_required(100.0, 0.5, 0.5, 2.0) == 0.0
    assert B.steps_required(100.0, 0.5, 0.0, 2.0) == 0.0


def test_steps_required_paper_scale_is_astronomical():
    # λ = 1e-3, d = 1.25e8, η = 1e-4, gap = 8 nats, ε = 0.01: ≈ 1.25e14/2e-4 · log(1600) ≈ 4.6e18
    t = B.steps_required(B.c_ls_upper(1e-3, 1.25e8), 1e-4, 8.0, 0.01)
    assert t == pytest.approx((1.25e14 + 1e3) / 2e-4 * math.log(1600.0), rel=1e-12)
    assert t > 1e18


def test_envelope_hand_values_paper_form():
    # λ = 0.5, C_LS(F) = 10 → C_LS(βF) = 5, η = 0.5 → ρ = 0.2; gap = 2, L = 1, σ² = 1
    # noise = ηLσ²/4 = 0.125; T = 0, 1, 2: 0.5·2·(1, 0.8, 0.64) + 0.125
    env = B.envelope([0, 1, 2], 2.0, 10.0, 0.5, 1.0, 1.0, 0.5)
    np.testing.assert_allclose(env, [1.125, 0.925, 0.765], rtol=1e-14)


def test_envelope_at_zero_steps():
    gap, c, eta, L, sig, lam = 3.0, 1e6, 1e-4, 50.0, 2.0, 1e-2
    noise = eta * L * sig / 4
    # paper form at T = 0: λ·gap + noise — below the true gap for λ < 1 (why eq. 41 cannot be a bound)
    assert B.envelope(0, gap, c, eta, L, sig, lam)[()] == pytest.approx(lam * gap + noise)
    assert B.envelope(0, gap, c, eta, L, sig, lam)[()] < gap
    # consistent form at T = 0: gap + λ²·C_LS(βF)·noise, with C_LS(βF) = λ·c
    cons = B.envelope(0, gap, c, eta, L, sig, lam, form="consistent")[()]
    assert cons == pytest.approx(gap + lam**2 * (lam * c) * noise)
    assert cons >= gap


def test_envelope_consistent_hand_values():
    # same inputs as the paper-form test: (0.8^T)·2 + 0.5²·5·0.125 = 2·0.8^T + 0.15625
    env = B.envelope([0, 1], 2.0, 10.0, 0.5, 1.0, 1.0, 0.5, form="consistent")
    np.testing.assert_allclose(env, [2.15625, 1.75625], rtol=1e-14)


def test_envelope_is_flat_at_paper_scale_and_monotone():
    c = B.c_ls_upper(1e-3, 1.25e8)
    steps = np.linspace(0, 1e5, 11)
    env = B.envelope(steps, 8.0, c, 1e-4, 100.0, 1.0, 1e-3)
    assert np.all(np.diff(env) <= 0)
    # ρ = 2e-4 / (1e-3 · 1.25e14) ≈ 1.6e-15: the decay over 1e5 steps is ~1.6e-10
    assert env[0] - env[-1] == pytest.approx(1e-3 * 8.0 * (1 - math.exp(1e5 * math.log1p(-2e-4 / (1e-3 * c)))))
    assert env[-1] / env[0] > 1 - 1e-9


def test_envelope_rejects_void_contraction_and_bad_form():
    with pytest.raises(ValueError, match="void"):
        B.envelope([0], 1.0, 1.0, 0.9, 1.0, 1.0, 0.5)  # ρ = 1.8/0.5 > 1
    with pytest.raises(ValueError, match="form"):
        B.envelope([0], 1.0, 10.0, 0.5, 1.0, 1.0, 0.5, form="nope")


# --------------------------------------------------------------------------- PAC-Bayes


def test_kl_upper_hand_values():
    # λ = 1 (β = 1): F + log(2) + log(1/(2π)) = 2 − log π, d = 2
    assert PB.kl_upper(2.0, 2.0, 1.0) == pytest.approx(2.0 - math.log(math.pi))
    # λ = 0.5 (β = 2), F = 1, d = 4: 2·1 + 2·log(1 + 4) + 2·log(0.5/(4π)) = 2 + 2·log(5/(8π))
    assert PB.kl_upper(1.0, 4.0, 0.5) == pytest.approx(2.0 + 2.0 * math.log(5.0 / (8.0 * math.pi)))
    # explicit β = 1, λ = 0.5, F = 1, d = 2: 1 + log(3) + log(0.5/(2π))
    assert PB.kl_upper(1.0, 2.0, 0.5, beta=1.0) == pytest.approx(1.0 + math.log(3.0) + math.log(1.0 / (4.0 * math.pi)))
    # eq. (52) as printed, λ = 0.5, F = 1, d = 4: 2 + 2·log 2 + 2·log(0.25/(2π)) = 2 + 2·log(1/(4π))
    assert PB.kl_upper(1.0, 4.0, 0.5, form="eq52") == pytest.approx(2.0 + 2.0 * math.log(1.0 / (4.0 * math.pi)))
    with pytest.raises(ValueError):
        PB.kl_upper(1.0, 4.0, 0.5, beta=2.0, form="eq52")


def test_pac_bayes_bound_hand_value():
    # R̂ = 1, KL = 3, n = 101, δ = 0.05: 1 + sqrt((3 + log(2·√101/0.05)) / (2·100))
    expected = 1.0 + math.sqrt((3.0 + math.log(40.0 * math.sqrt(101.0))) / 200.0)
    assert PB.pac_bayes_bound(1.0, 3.0, 101, 0.05) == pytest.approx(expected, rel=1e-14)
    # loss range b scales the complexity term
    assert PB.pac_bayes_complexity(3.0, 101, 0.05, loss_range=2.0) == pytest.approx(2.0 * (expected - 1.0))


def test_pac_bayes_input_checks():
    with pytest.raises(ValueError):
        PB.pac_bayes_complexity(-1.0, 101, 0.05)  # unclamped KL
    with pytest.raises(ValueError):
        PB.pac_bayes_complexity(1.0, 1, 0.05)
    with pytest.raises(ValueError):
        PB.pac_bayes_complexity(1.0, 101, 1.5)


def test_kl_clamped_and_flagged_small_lam_large_d():
    # λ = 1e-3, d = 1.25e8, F = 5: raw = 5000 + (d/2)·log((1 + 1e-6)/(2π)) ≈ −1.149e8 < 0
    lam, d, F, n, delta = 1e-3, 1.25e8, 5.0, 1_000_000, 0.05
    raw = F / lam + 0.5 * d * math.log1p(1.0 / lam**2) + 0.5 * d * math.log(lam**2 / (2 * math.pi))
    pb = PB.pac_bayes(4.0, F, d, lam, n=n, delta=delta, vocab_size=50257)
    assert pb.kl_raw == pytest.approx(raw, rel=1e-9)
    assert pb.kl_raw < -1e8
    assert pb.kl_used == 0.0 and pb.kl_clamped is True
    assert pb.risk_bound == pytest.approx(4.0 + math.sqrt(math.log(2 * math.sqrt(n) / delta) / (2 * (n - 1))))
    assert pb.ppl_bound == pytest.approx(math.exp(pb.risk_bound))
    assert pb.vacuous is False and pb.undefined is False
    assert pb.beta == pytest.approx(1e3)


def test_kl_not_clamped_when_positive():
    # small d, F/λ large: 5000 + 5·log((1 + 1e-6)/(2π)) > 0
    pb = PB.pac_bayes(4.0, 5.0, 10.0, 1e-3, n=1000, delta=0.05, vocab_size=50257)
    assert pb.kl_clamped is False and pb.kl_used == pb.kl_raw > 0


def test_vacuous_flag_and_overflow():
    # vocabulary of 2: log 2 ≈ 0.693 < R̂ = 1 → vacuous
    pb = PB.pac_bayes(1.0, 1.0, 10.0, 0.1, n=1000, delta=0.05, vocab_size=2)
    assert pb.vacuous is True
    pb = PB.pac_bayes(1.0, 1.0, 10.0, 0.1, n=1000, delta=0.05, vocab_size=50257)
    assert pb.vacuous is False
    # risk bound above ~709 nats: exp overflows → ppl bound inf, vacuous
    pb = PB.pac_bayes(1000.0, 1.0, 10.0, 0.1, n=1000, delta=0.05, vocab_size=50257)
    assert pb.ppl_bound == math.inf and pb.vacuous is True


# --------------------------------------------------------------------------- λ = 0


def test_lam_zero_is_undefined_everywhere():
    assert B.c_ls_upper(0.0, 1e6) is None
    assert B.c_ls_upper(0, np.array([1e8, 1e9])) is None
    assert B.c_p_upper(0.0, 1e6) is None
    assert B.c_ls_gibbs(0.0, 1e6) is None
    assert B.eta_max(0.0, 1.0) is None
    assert B.steps_required(B.c_ls_upper(0.0, 1e6), 1e-4, 1.0, 0.01) is None
    assert B.envelope([0, 1], 1.0, 1e6, 1e-4, 1.0, 1.0, 0.0) is None
    assert B.envelope([0, 1], 1.0, None, 1e-4, 1.0, 1.0, 1e-3) is None
    assert PB.kl_upper(3.0, 1e6, 0.0) is None
    assert PB.kl_upper(3.0, 1e6, 0.0, form="eq52") is None
    pb = PB.pac_bayes(3.0, 3.0, 1e6, 0.0, n=1000, delta=0.05, vocab_size=50257)
    assert pb.undefined is True
    assert pb.risk_bound is None and pb.ppl_bound is None and pb.kl_raw is None
    assert pb.kl_clamped is None and pb.vacuous is None
    g = B.guideline_checks(1e-4, 0.0, 1.0, 5e4, 10.8)
    assert g["eta_limit"] is None and g["eta_max"] is None and g["eta_ok"] is None
    assert T.format_value(None) == "undefined"


def test_negative_or_nonfinite_lam_is_an_error():
    for bad in (-1e-3, math.inf, math.nan):
        with pytest.raises(ValueError):
            B.c_ls_upper(bad, 10.0)
        with pytest.raises(ValueError):
            PB.kl_upper(1.0, 10.0, bad)


# --------------------------------------------------------------------------- Table I, Fig 2


def test_guideline_checks_hand_values():
    # η = 1e-4, λ = 1e-3, σ² = 1: limit = 1e-3/4 = 2.5e-4 ≥ η → ok
    # λ‖θ₀‖² = 1e-3 · 5e4 = 50 vs 10·L(θ₀) = 108 → ratio 0.463, not ok
    g = B.guideline_checks(1e-4, 1e-3, 1.0, 5e4, 10.8)
    assert g["eta_limit"] == pytest.approx(2.5e-4) and g["eta_max"] == pytest.approx(2.5e-4)
    assert g["eta_ok"] is True
    assert g["lam_theta0"] == pytest.approx(50.0) and g["ten_L0"] == pytest.approx(108.0)
    assert g["lam_theta0_ratio"] == pytest.approx(50.0 / 108.0)
    assert g["lam_theta0_ok"] is False
    g = B.guideline_checks(5e-4, 1e-2, 4.0, 5e4, 10.8)  # limit 1e-2/16 = 6.25e-4; 500 ≥ 108
    assert g["eta_ok"] is True and g["lam_theta0_ok"] is True
    g = B.guideline_checks(1e-3, 1e-2, 4.0, 5e4, 10.8)  # 1e-3 > 6.25e-4
    assert g["eta_ok"] is False
    assert B.guideline_checks(1e-3, 1e-2, 0.0, 5e4, 10.8)["eta_limit"] == math.inf


def test_psi_slope_reference():
    ref = psi.psi_slope_reference(1e-2, s=2.0)
    assert ref["asymptote"] == pytest.approx(1e-4 / 2) and ref["lemma4_lower"] == pytest.approx(1e-4 / 4)
    assert psi.psi_slope_reference(0.0) == {"asymptote": 0.0, "lemma4_lower": 0.0}


# --------------------------------------------------------------------------- table rows

PARAMS = dict(n_train_tokens=1_000_000, delta=0.05, s=[1.0, 2.0], eta=1e-4, sigma_sq=1.0, vocab_size=50257)


def _measure(step, lam, F, **extra):
    m = {"dataset": "tiny", "step": step, "lam": lam, "seed": 0, "d": 1000.0, "loss": F - 0.1,
         "F": F, "theta_sq_norm": 200.0, "val_loss": 4.0, "val_ppl": math.exp(4.0)}  # fmt: skip
    m.update(extra)
    return m


def test_bounds_row_values():
    # a Langevin run whose η meets η_max: every Theorem 2 hypothesis holds
    row = T.bounds_row(_measure(10, 1e-2, 4.1), f0=6.0, f_min=4.0, smoothness_L=20.0, update_rule="langevin",
                       noise_beta=100.0, **PARAMS)
    assert row["status"] == "ok" and row["step"] == 10 and row["dataset"] == "tiny"
    # C_LS: s = 1: 100(1 + 1e5) ; s = 2: 200(1 + 1000/0.02) = 200(1 + 5e4)
    assert row["c_ls_s1"] == pytest.approx(100.0 * (1 + 1e5))
    assert row["c_ls_s2"] == pytest.approx(200.0 * (1 + 5e4))
    assert row["c_ls"] == row["c_p"] == row["c_ls_s1"]
    assert row["c_ls_gibbs"] == pytest.approx(1.0 + 1e5)  # s + d/λ
    assert row["eta_max"] == pytest.approx(2.5e-3) and row["eta_ok"] is True
    assert row["theorem2_status"] == "ok" and row["envelope_status"] == "ok"
    # F* = 0 (a lower bound of min F): T = C/(2η) · log(2·6/0.01)
    assert row["f_star"] == 0.0 and row["f_min_ckpt"] == 4.0
    assert row["steps_required"] == pytest.approx(row["c_ls"] / 2e-4 * math.log(1200.0))
    assert row["steps_required_eq33"] == pytest.approx(row["c_ls"] / 2e-4 * math.log(600.0))
    env = B.envelope([10], 6.0, row["c_ls"], 1e-4, 20.0, 1.0, 1e-2)[0]
    assert row["envelope"] == pytest.approx(env)
    # F = 4.1 > λ(1−ρ)^T·6 + noise ≈ 0.06 for every F* in [0, 4]: violated for certain
    assert row["envelope_check"] == "violated"
    # KL raw = F/λ + (d/2)·log((1 + λ²)/(2π)) = 410 + 500·log(1.0001/(2π)) < 0: no PAC-Bayes number
    assert row["pb_kl_raw"] == pytest.approx(410.0 + 500.0 * math.log(1.0001 / (2 * math.pi)))
    assert row["hyp_kl_nonneg"] is False and row["hyp_loss_le_1"] is False
    assert row["pac_bayes_status"].startswith("n/a: KL bound = ") and "L = 4 > 1 nat" in row["pac_bayes_status"]
    assert row["pb_ppl_bound"] is None and row["pb_ppl_ratio"] is None and row["pb_risk_hat"] == pytest.approx(4.0)


def test_adamw_rows_fail_the_update_rule_hypothesis():
    row = T.bounds_row(_measure(10, 1e-2, 4.1), f0=6.0, f_min=4.0, smoothness_L=20.0, **PARAMS)
    assert row["hyp_update_eq36"] is False and row["hyp_eta_le_eta_max"] is True
    assert row["theorem2_status"] == "n/a: update rule adamw, not eq. (36)"
    assert row["steps_required"] is None and row["envelope"] is None and row["envelope_check"] is None
    assert row["c_ls"] is not None  # C_LS needs only λ > 0
    text = T.format_row(row)
    assert text["steps_required"] == "n/a" and text["envelope"] == "n/a"


def test_eta_above_eta_max_and_rising_F_are_named_with_their_numbers():
    params = dict(PARAMS, eta=1e-2)  # η_max = 2.5e-3
    row = T.bounds_row(_measure(10, 1e-2, 7.5), f0=6.0, f_min=4.0, smoothness_L=20.0, update_rule="langevin",
                       noise_beta=50.0, **params)
    assert row["hyp_eta_le_eta_max"] is False and row["hyp_f_le_f0"] is False and row["hyp_beta_inv_lam"] is False
    assert row["theorem2_status"] == "n/a: η = 0.01 > η_max = 0.0025 (σ² = 1)"
    # F rising is reported, not a hypothesis of the envelope (it would make "holds" restate the filter)
    assert row["envelope_status"] == "n/a: η = 0.01 > η_max = 0.0025 (σ² = 1); β = 50, 1/λ = 100"
    no_noise = T.bounds_row(_measure(10, 1e-2, 4.1), f0=6.0, f_min=4.0, smoothness_L=20.0, update_rule="langevin",
                            **PARAMS)
    assert no_noise["envelope_status"] == "n/a: no injected noise (β undefined)" and no_noise["envelope"] is None
    assert row["steps_required"] is None and row["envelope"] is None


def test_pac_bayes_number_only_where_its_hypotheses_hold():
    # d = 2, λ = 0.5, β = 2: KL = 2F + log 5 + log(0.5/(4π)) = 0.39 > 0 for F = 1; L = 0.9 ≤ 1
    m = _measure(0, 0.5, 1.0, d=2.0, loss=0.9)
    row = T.bounds_row(m, f0=1.0, f_min=1.0, smoothness_L=1.0, **PARAMS)
    assert row["hyp_kl_nonneg"] is True and row["hyp_loss_le_1"] is True and row["pac_bayes_status"] == "ok"
    kl = 2.0 + math.log(5.0) + math.log(0.5 / (4 * math.pi))
    assert row["pb_kl_used"] == pytest.approx(kl) and row["pb_kl_clamped"] is False
    assert row["pb_risk_bound"] == pytest.approx(0.9 + math.sqrt((kl + math.log(2e3 / 0.05)) / (2 * (1e6 - 1))))
    # the same checkpoint with F = 0.8: KL = −0.01 < 0, no number
    row = T.bounds_row(_measure(0, 0.5, 0.8, d=2.0, loss=0.7), f0=0.8, f_min=0.8, smoothness_L=1.0, **PARAMS)
    assert row["hyp_kl_nonneg"] is False and row["pb_risk_bound"] is None


def test_bounds_row_lam_zero_prints_undefined():
    row = T.bounds_row(_measure(10, 0.0, 4.1), f0=6.0, f_min=4.0, smoothness_L=20.0, update_rule="langevin",
                       **PARAMS)
    assert row["status"] == "undefined"
    for key in ("c_ls", "c_p", "c_ls_s1", "c_ls_s2", "c_ls_gibbs", "eta_max", "eta_ok", "steps_required",
                "steps_required_eq33", "envelope", "envelope_consistent", "pb_risk_bound", "pb_ppl_bound",
                "pb_kl_raw", "pb_kl_used", "pb_ppl_ratio"):  # fmt: skip
        assert row[key] is None, key
    assert row["theorem2_status"] == row["pac_bayes_status"] == "undefined: λ = 0"
    text = T.format_row(row)
    assert text["c_ls"] == "undefined" and text["pb_ppl_bound"] == "undefined"
    assert text["pb_undefined"] == "true" and text["status"] == "undefined"


def test_bounds_row_without_run_inputs_gives_no_theorem2_number():
    row = T.bounds_row(_measure(10, 1e-2, 4.1), update_rule="langevin", **PARAMS)
    assert row["steps_required"] is None and row["envelope"] is None
    assert row["theorem2_status"] == "n/a: F(θ₀) not given"
    assert row["c_ls"] is not None


def test_bounds_row_computes_F_when_missing():
    m = _measure(0, 1e-2, 4.1)
    del m["F"]
    row = T.bounds_row(m, **PARAMS)
    assert row["F"] == pytest.approx(4.0 + 0.5 * 1e-2 * 200.0)


def test_run_bounds_picks_f0_f_min_and_L():
    ms = [_measure(20, 1e-2, 4.0, top_eigenvalues=[30.0, 5.0]),
          _measure(0, 1e-2, 7.0, top_eigenvalues=[10.0]),
          _measure(10, 1e-2, 4.5, top_eigenvalues=[50.0, 2.0])]  # fmt: skip
    rows = T.run_bounds(ms, update_rule="langevin", noise_beta=100.0, **PARAMS)
    assert [r["step"] for r in rows] == [0, 10, 20]
    assert all(r["f0"] == 7.0 and r["f_min_ckpt"] == 4.0 and r["f_star"] == 0.0 and r["smoothness_L"] == 50.0
               for r in rows)
    assert rows[0]["envelope"] == pytest.approx(1e-2 * 7.0 + 1e-4 * 50.0 * 1.0 / 4)
    assert T.run_bounds([], **PARAMS) == []


def test_envelope_check_brackets_the_unknown_minimum():
    # F_t − factor·F₀ − noise ≤ (1 − factor)·F* for F* in [lo, hi]
    assert B.envelope_check(1.0, 2.0, 0.5, 0.1, 0.0, 0.8) == "holds"          # −0.1 ≤ 0
    assert B.envelope_check(1.3, 2.0, 0.5, 0.1, 0.0, 0.8) == "undetermined"   # 0.2 in (0, 0.4]
    assert B.envelope_check(1.5, 2.0, 0.5, 0.1, 0.0, 0.8) == "undetermined"   # 0.4 = 0.5·0.8: holds at F* = 0.8
    assert B.envelope_check(1.6, 2.0, 0.5, 0.1, 0.0, 0.8) == "violated"       # 0.5 > 0.4
    # the terms reassemble the envelope
    factor, noise = B.envelope_terms([0, 5], 10.0, 0.5, 1.0, 1.0, 0.5, form="consistent")
    np.testing.assert_allclose(factor * 2.0 + noise, B.envelope([0, 5], 2.0, 10.0, 0.5, 1.0, 1.0, 0.5,
                                                                 form="consistent"))


def test_format_value():
    assert T.format_value(True) == "true" and T.format_value(np.bool_(False)) == "false"
    assert T.format_value(1.23456789) == "1.23457"
    assert T.format_value(math.inf) == "inf"
    assert T.format_value(3) == "3"
    with pytest.raises(ValueError):
        T.format_value(math.nan)
