"""The HVP cost sweep of Fig 10 on tiny GPT-Neo widths."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_params
from tests.figures.synthetic import write_stats
from villani.io import tables
from villani.measure.hvp_cost import PeakMemory, run_hvp_cost, sized_config
from villani.plan.digest import stage_digest


def test_sized_config_scales_width_only():
    p = tiny_params()
    cfg = sized_config(p["model"], 12)["config"]
    assert cfg["hidden_size"] == 12 and cfg["intermediate_size"] == 48
    assert 12 % cfg["num_heads"] == 0 and cfg["num_heads"] <= p["model"]["config"]["num_heads"]
    assert cfg["num_layers"] == p["model"]["config"]["num_layers"]


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_sweep_writes_one_row_per_size(tmp_path):
    p = tiny_params(figures={"model_sizes": [16, 8], "cost_repeats": 1})
    write_stats(tmp_path, p, vocab=300, train_tokens=64, other_tokens=(64, 64))
    path = run_hvp_cost(p, tmp_path, device="cpu")
    df = tables.read("hvp_cost", path)  # every column of its schema, each of its kind
    assert list(df["hidden_size"]) == [8, 16]
    assert df["d"].is_monotonic_increasing
    for col in ("seconds_hvp", "seconds_hvp_fresh", "seconds_grad"):
        assert (df[col] > 0).all(), col
    # the memory pass builds the model: at least the fp32 parameters and their gradient
    assert (df["peak_memory_bytes"] >= 8 * df["d"]).all()
    assert df["peak_memory_bytes"].is_monotonic_increasing
    assert set(df["memory_source"]) == {PeakMemory(torch.device("cpu")).source}
    assert set(df["device"]) == {"cpu"}


def test_digest_follows_the_keys_it_reads():
    p = tiny_params()
    q = tiny_params(figures={"model_sizes": [8]})
    r = tiny_params(train={"lr": 0.5})
    assert stage_digest(p, "cost") != stage_digest(q, "cost")
    assert stage_digest(p, "cost") == stage_digest(r, "cost")


MB160 = 40_000_000 * 4  # bytes of torch.ones(40_000_000), float32


def test_peak_memory_sees_a_large_allocation():
    with PeakMemory(torch.device("cpu")) as mem:
        x = torch.ones(40_000_000)
        x += 1  # in place: no second buffer
    del x
    assert MB160 <= mem.peak() < MB160 + 1_000_000


def test_peak_memory_is_the_peak_of_live_tensors_not_their_sum():
    with PeakMemory(torch.device("cpu")) as apart:
        x = torch.ones(40_000_000)
        del x
        y = torch.ones(40_000_000)
        del y
    with PeakMemory(torch.device("cpu")) as together:
        x = torch.ones(40_000_000)
        y = x * 2
        del x, y
    assert MB160 <= apart.peak() < MB160 + 1_000_000
    assert 2 * MB160 <= together.peak() < 2 * MB160 + 1_000_000


def test_peak_memory_ignores_tensors_from_before_the_block():
    old = torch.ones(40_000_000)
    with PeakMemory(torch.device("cpu")) as mem:
        del old  # its allocation was never seen: its free must not offset what follows
        small = torch.ones(1000)
    assert 4000 <= mem.peak() < 1_000_000
    del small


def test_peak_memory_is_known_only_after_the_block():
    with PeakMemory(torch.device("cpu")) as mem:
        with pytest.raises(RuntimeError, match="after the with-block"):
            mem.peak()
