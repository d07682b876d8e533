"""The HVP cost sweep of Fig 10 on tiny GPT-Neo widths."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.conftest import tiny_params
from villani import layout
from villani.cost import PeakMemory, cost_digest, run_hvp_cost, sized_config


def test_sized_config_scales_width_only():
    p = tiny_params()
    cfg = sized_config(p["model"], 12)["config"]
    assert cfg["hidden_size"] == 12 and cfg["intermediate_size"] == 48
    assert 12 % cfg["num_heads"] == 0 and cfg["num_heads"] <= p["model"]["config"]["num_heads"]
    assert cfg["num_layers"] == p["model"]["config"]["num_layers"]


def test_sweep_writes_one_row_per_size(tmp_path):
    p = tiny_params(figures={"model_sizes": [16, 8], "cost_repeats": 1})
    stats = layout.fmt(layout.DATA_STATS, tmp_path, dataset=p["data"]["name"])
    stats.parent.mkdir(parents=True)
    stats.write_text(json.dumps({"vocab_size": 300}))
    path = run_hvp_cost(p, tmp_path, device="cpu")
    df = pd.read_csv(path)
    assert list(df["hidden_size"]) == [8, 16]
    assert df["d"].is_monotonic_increasing
    for col in ("seconds_hvp", "seconds_hvp_fresh", "seconds_grad"):
        assert (df[col] > 0).all(), col
    assert (df["peak_memory_bytes"] >= 0).all()
    assert df["memory_source"].str.len().gt(0).all()
    assert set(df["device"]) == {"cpu"}


def test_digest_follows_the_keys_it_reads():
    p = tiny_params()
    q = tiny_params(figures={"model_sizes": [8]})
    r = tiny_params(train={"lr": 0.5})
    assert cost_digest(p) != cost_digest(q)
    assert cost_digest(p) == cost_digest(r)


def test_peak_memory_sees_a_large_allocation():
    import torch

    with PeakMemory(torch.device("cpu")) as mem:
        x = torch.ones(40_000_000)  # 160 MB
        x += 1
        peak = mem.peak()
    del x
    if mem.kind == "vmhwm":
        assert peak > 100e6
    else:  # ru_maxrss cannot be reset: only a lower bound check is possible
        assert peak >= 0
