"""metrics.json: a few headline numbers, nested as DVC nests them, with DVC-safe keys."""

from __future__ import annotations

import math

import pytest

from villani.tracking.metrics import flat_metrics, metric_key, nested_metrics


def test_metric_key_writes_lambda_and_s_without_dots_or_equals():
    assert metric_key("measurement", "lam=0.1", "psi_s=1.0") == "measurement_lam0p1_psi_s1p0"
    assert metric_key("measurement", "lam=1e-05", "val_ppl") == "measurement_lam1em05_val_ppl"
    assert metric_key("training", "adamw/lam=0.0", "train_loss") == "training_adamw_lam0p0_train_loss"
    assert metric_key("pac_bayes", "lam=1e+20", "r2") == "pac_bayes_lam1e20_r2"


def test_nested_metrics_keep_the_nesting_and_only_finite_numbers():
    nested = {
        "claims": {"supported": 3, "refuted": 0},
        "adamw": {"lam=0.1": {"val_ppl": 2.5, "psi_s=1.0": -3.0, "spectral_ratio": None},
                  "lam=0.0": {"val_ppl": math.nan, "psi_s=1.0": "undefined"}},
        "langevin": {"lam=1e-05": {"val_ppl": math.inf}},
    }
    assert nested_metrics(nested) == {"claims": {"supported": 3, "refuted": 0},
                                      "adamw": {"lam0p1": {"val_ppl": 2.5, "psi_s1p0": -3.0}}}


def test_flat_metrics_keeps_only_finite_numbers():
    nested = {
        "training": {"adamw/lam=0.1": {"train_loss": 2.5, "tokens_seen": 100}},
        "measurement": {"lam=0.1": {"psi_s=1.0": -3.0, "spectral_ratio": None, "val_ppl": math.nan}},
        "pac_bayes": {"lam=0.0": "undefined", "lam=0.1": {"r2": 0.5, "n_vacuous": 0, "final_ratio": math.inf}},
    }
    flat = flat_metrics(nested)
    assert flat == {"training_adamw_lam0p1_train_loss": 2.5, "training_adamw_lam0p1_tokens_seen": 100,
                    "measurement_lam0p1_psi_s1p0": -3.0, "pac_bayes_lam0p1_r2": 0.5, "pac_bayes_lam0p1_n_vacuous": 0}
    assert all("." not in k and "=" not in k for k in flat)


def test_colliding_keys_are_refused():
    with pytest.raises(ValueError, match="two entries map to the key 'a_lam0p1'"):
        flat_metrics({"a": {"lam=0.1": 1.0, "lam0p1": 2.0}})
    with pytest.raises(ValueError, match="two entries map to the key 'lam0p1'"):
        nested_metrics({"a": {"lam=0.1": 1.0, "lam0p1": 2.0}})
