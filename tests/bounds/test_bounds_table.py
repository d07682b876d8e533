"""The bounds table on given inputs: hand-computed rows, λ = 0 → "undefined", hypotheses
that fail → "n/a" with the reason, per variant."""

from __future__ import annotations

import csv
import json
import math

import pytest

from tests.conftest import tiny_params
from tests.figures.synthetic import write_record, write_stats
from villani.bounds.table import run_sigma_sq, write_bounds
from villani.plan import layout
from villani.plan.runs import Run


def _params(lambdas, langevin=()):
    return tiny_params(train={"lambdas": lambdas, "seeds": [0], "steps": 10, "warmup_steps": 2, "lr": 0.1,
                              "checkpoints": {"count": 1}, "segments": 1,
                              "langevin": {"lambdas": list(langevin), "lr": 0.2, "beta": None}},
                       bounds={"delta": 0.05, "epsilon": 0.01}, measure={"s_values": [1.0]})


def _tree(root, p, d, vocab=50, n_tokens=101, losses=(2.0, 1.5), theta_sq=(4.0, 2.0)):
    """Stats and two checkpoint measurements (steps 0 and 10) per run with the given numbers."""
    ds = p["data"]["name"]
    write_stats(root, p, vocab=vocab, train_tokens=n_tokens, other_tokens=(10, 10))
    runs = [("adamw", lam) for lam in p["train"]["lambdas"]] + [("langevin", lam)
                                                                  for lam in p["train"]["langevin"]["lambdas"]]
    for variant, lam in runs:
        run = Run(ds, variant, float(lam), 0)
        for i, step in enumerate((0, 10)):
            F = losses[i] + 0.5 * lam * theta_sq[i]
            rec = {"step": step, "lam": float(lam), "seed": 0, "d": d, "loss": losses[i], "F": F,
                   "theta_sq_norm": theta_sq[i], "val_loss": losses[i] + 0.25, "val_ppl": math.exp(losses[i] + 0.25),
                   "top_eigenvalues": [3.0, 1.0] if i == 0 else [2.0, 1.0],
                   "grad_noise_sigma_sq": (0.5, 0.2)[i],
                   "trace_L": {"mean": 1.0, "ci95": [0.9, 1.1]}}  # a complete measure record; no bound uses it
            write_record(root, p, run, step, rec)
    write_bounds(p, root)
    folder = layout.fmt(layout.BOUNDS_DIR, root, dataset=ds)
    with open(folder / "bounds.csv") as f:
        rows = list(csv.DictReader(f))
    return rows, json.loads((folder / "bounds.json").read_text())


def test_hand_computed_rows_of_a_langevin_run(tmp_path):
    # λ = 0.5, d = 2, s = 1, η = 0.2 (train.langevin.lr), σ² = max(0.5, 0.2) = 0.5, n = 101, δ = 0.05, vocab 50
    p = _params([0.5], langevin=[0.5])
    rows, doc = _tree(tmp_path, p, d=2, losses=(0.9, 0.8))
    lv = [r for r in doc["rows"] if r["variant"] == "langevin"]
    r0, r1 = lv
    # C_LS = (s/λ)(1 + d/(λs)) = 2 · (1 + 4) = 10; C_LS(βF) = λ·C_LS = 5
    assert r0["c_ls"] == pytest.approx(10.0) and r0["c_p"] == pytest.approx(10.0)
    assert r0["c_ls_gibbs"] == pytest.approx(5.0)
    # η_max = min(1, λ/(4σ²)) = 0.5/2 = 0.25 ≥ η = 0.2: Theorem 2 applies
    assert r0["eta"] == 0.2 and r0["sigma_sq"] == 0.5 and r0["eta_max"] == pytest.approx(0.25)
    assert r0["hyp_update_eq36"] is True and r0["hyp_eta_le_eta_max"] is True and r0["theorem2_status"] == "ok"
    # F0 = 0.9 + 0.25·4 = 1.9, F* = 0, lowest F = 0.8 + 0.25·2 = 1.3; T = C/(2η)·log(2·F0/ε) = 25·log(380)
    assert r0["f0"] == pytest.approx(1.9) and r0["f_star"] == 0.0 and r0["f_min_ckpt"] == pytest.approx(1.3)
    assert r0["steps_required"] == pytest.approx(25 * math.log(380.0))
    assert r0["steps_required_eq33"] == pytest.approx(25 * math.log(190.0))
    # L = 3; envelope at T = 0 as printed: λ·F0 + ηLσ²/4 = 0.95 + 0.075 < F0: violated for every F* ≤ 1.3
    assert r0["envelope"] == pytest.approx(0.95 + 0.2 * 3.0 * 0.5 / 4)
    assert r0["envelope_check"] == "violated"
    # the step-10 checkpoint: F fell to 1.3 ≤ F0
    assert r1["hyp_f_le_f0"] is True and r1["envelope_status"] == "ok"
    # KL (β = 2): βF + (d/2)log(1 + β/λ) + (d/2)log(λ/(2πβ)) = 3.8 + log 5 + log(0.5/(4π)) > 0; L = 0.9 ≤ 1
    kl = 3.8 + math.log(5.0) + math.log(0.5 / (4 * math.pi))
    assert r0["pac_bayes_status"] == "ok" and r0["pb_kl_raw"] == pytest.approx(kl)
    bound = 0.9 + math.sqrt((kl + math.log(2 * math.sqrt(101) / 0.05)) / 200)
    assert r0["pb_risk_bound"] == pytest.approx(bound)
    assert r0["pb_ppl_ratio"] == pytest.approx(math.exp(bound) / math.exp(1.15))
    # the AdamW run at the same λ: its update rule is not eq. (36) → no Theorem 2 number, "n/a" in the CSV
    c0 = next(r for r in rows if r["variant"] == "adamw" and r["step"] == "0")
    assert c0["steps_required"] == "n/a" and c0["envelope"] == "n/a"
    assert c0["theorem2_status"] == "n/a: update rule adamw, not eq. (36)"
    assert float(c0["c_ls"]) == 10.0 and c0["status"] == "ok" and c0["hyp_update_eq36"] == "false"
    # the summary per variant and λ
    s = doc["summary"]["langevin"]["0.5"]
    assert s["theorem2"]["n_applicable"] == 2 and s["envelope"]["n_violated"] >= 1
    pb = s["pac_bayes"]
    assert pb["n_applicable"] == 2 and pb["mean_ratio"] == pytest.approx(
        sum(r["pb_ppl_ratio"] for r in lv) / 2)
    assert doc["summary"]["adamw"]["0.5"]["theorem2"]["failed"]["update_eq36"] == 2
    assert doc["inputs"]["eta"] == {"adamw/lam0.5/seed0": 0.1, "langevin/lam0.5/seed0": 0.2}


def test_lambda_zero_is_undefined_never_a_number(tmp_path):
    p = _params([0.0, 0.5])
    rows, doc = _tree(tmp_path, p, d=2)
    zero = [r for r in rows if float(r["lam"]) == 0.0]
    assert len(zero) == 2
    for r in zero:
        assert r["status"] == "undefined"
        for key in ("c_ls", "c_p", "c_ls_gibbs", "eta_max", "eta_ok", "steps_required", "envelope",
                    "pb_kl_raw", "pb_kl_used", "pb_kl_clamped", "pb_risk_bound", "pb_ppl_bound", "pb_vacuous",
                    "pb_ppl_ratio"):
            assert r[key] == "undefined", key
        assert r["pb_undefined"] == "true"
    for line in (tmp_path / "bounds" / p["data"]["name"] / "bounds.csv").read_text().splitlines():
        assert "nan" not in line.lower().split(",")
    raw = [r for r in doc["rows"] if r["lam"] == 0.0]
    assert all(r["c_ls"] is None and r["pb_ppl_bound"] is None for r in raw)
    assert doc["summary"]["adamw"]["0.0"]["pac_bayes"] == "undefined"
    assert doc["summary"]["adamw"]["0.0"]["c_ls"] == {"1": None}
    assert doc["summary"]["adamw"]["0.5"]["status"] == "ok"


def test_negative_kl_gives_no_bound_and_says_why(tmp_path):
    # d = 1000, λ = 0.5, β = 2: (d/2)(log 5 + log(0.5/(4π))) ≈ −807 dominates βF = 6 → KL < 0
    p = _params([0.5])
    rows, doc = _tree(tmp_path, p, d=1000, vocab=5)
    r0 = next(r for r in doc["rows"] if r["step"] == 0)
    assert r0["pb_kl_raw"] == pytest.approx(6.0 + 500 * (math.log(5.0) + math.log(0.5 / (4 * math.pi))))
    assert r0["hyp_kl_nonneg"] is False and r0["hyp_loss_le_1"] is False
    assert r0["pb_kl_used"] is None and r0["pb_risk_bound"] is None and r0["pb_ppl_ratio"] is None
    c0 = next(r for r in rows if r["step"] == "0")
    assert c0["pb_ppl_bound"] == "n/a" and c0["pb_kl_clamped"] == "n/a"
    assert c0["pac_bayes_status"] == "n/a: KL bound = -801.4 < 0; L = 2 > 1 nat"
    pb = doc["summary"]["adamw"]["0.5"]["pac_bayes"]
    assert pb["n_applicable"] == 0 and pb["mean_ratio"] is None and pb["r2"] is None
    assert pb["failed"] == {"lam_positive": 0, "kl_nonneg": 2, "loss_le_1": 2}


def test_sigma_sq_is_the_largest_measured_and_required():
    assert run_sigma_sq([{"grad_noise_sigma_sq": 0.2}, {"grad_noise_sigma_sq": None},
                         {"grad_noise_sigma_sq": 0.7}]) == 0.7
    with pytest.raises(ValueError, match="grad_noise_sigma_sq"):
        run_sigma_sq([{"grad_noise_sigma_sq": None, "_path": "x/step0000000.json"}])


def test_missing_measurement_is_a_one_line_error(tmp_path):
    p = _params([0.5])
    _tree(tmp_path, p, d=2)
    (tmp_path / "runs" / p["data"]["name"] / "adamw" / "lam0.5" / "seed0" / "measure" / "step0000010.json").unlink()
    with pytest.raises(ValueError, match="step0000010.json"):
        write_bounds(p, tmp_path)
