"""2-D landscape (Fig 3): filter-normalised directions, centre value, no weight drift."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from tests.measure.conftest import load_micro_model, set_ids
from villani.data import load_blocks
from villani.measure.landscape import (
    filter_normalized_direction,
    run_landscape,
    surface,
)
from villani.plan import layout
from villani.plan.config import resolve


def test_directions_are_filter_normalised(micro):
    p, root = micro
    model = load_micro_model(p, root, 0.01, 12, dtype=torch.float32)
    theta0 = {n: q.detach().clone() for n, q in model.named_parameters()}
    d = filter_normalized_direction(theta0, torch.Generator().manual_seed(3))
    assert set(d) == set(theta0)
    kinds = set()
    for name, w in theta0.items():
        if w.dim() < 2:
            assert bool((d[name] == 0).all()), name
            kinds.add("1d")
            continue
        kinds.add("2d")
        np.testing.assert_allclose(d[name].double().reshape(w.shape[0], -1).norm(dim=1),
                                   w.double().reshape(w.shape[0], -1).norm(dim=1), rtol=1e-5)
        assert not torch.allclose(d[name], w)  # a rescaled random direction, not θ₀ itself
    assert kinds == {"1d", "2d"}
    # the embedding is (vocab, hidden): its rows are tokens
    assert d["transformer.wte.weight"].shape == (model.config.vocab_size, 4)



@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_direction_is_the_same_on_the_gpu():
    """Found by the GPU check: θ₀ on the GPU and the CPU generator met in one expression.
    The direction is drawn and scaled on the CPU, then moved: equal on either device."""
    theta0 = {"w": torch.randn(5, 7, generator=torch.Generator().manual_seed(0)), "b": torch.ones(5)}
    on_cpu = filter_normalized_direction(theta0, torch.Generator().manual_seed(3))
    on_gpu = filter_normalized_direction({k: v.cuda() for k, v in theta0.items()}, torch.Generator().manual_seed(3))
    assert all(on_gpu[k].device.type == "cuda" and torch.equal(on_gpu[k].cpu(), on_cpu[k]) for k in theta0)

def _hf_F(model, blocks, lam):
    with torch.no_grad():
        losses = [float(model(input_ids=x, labels=x).loss) for x in blocks.split(1)]
    tsq = float(sum(q.detach().double().square().sum() for q in model.parameters()))
    return float(np.mean(losses)) + 0.5 * lam * tsq  # equal-length blocks: token mean = block mean


@pytest.mark.parametrize("lam", [0.0, 0.01])
def test_surface_centre_equals_F_at_theta0(micro, lam):
    """The trained run of λ at its last checkpoint (params.yaml's ``center: final``), every slice
    through θ₀; slice 0 is what one slice drew, the next slice new directions."""
    p, root = micro
    p = resolve({**p, "landscape": {**p["landscape"], "slices": 2, "center": "final"}})
    out = run_landscape(p, lam, root, "cpu")
    table = pd.read_csv(f"{out}/surface.csv")
    info = json.loads(open(f"{out}/surface.json").read())
    g, last = p["landscape"]["grid"], p["train"]["steps"]
    assert len(table) == 2 * g * g and list(table.columns) == ["slice", "a", "b", "loss", "F", "theta_sq"]
    assert info["slices"] == 2 and len(info["per_slice"]) == 2
    assert info["argmin"] == info["per_slice"][0]["argmin"] and info["per_slice"][0] != info["per_slice"][1]
    first = run_landscape(resolve({**p, "landscape": {**p["landscape"], "slices": 1}}), lam, root, "cpu")
    pd.testing.assert_frame_equal(pd.read_csv(f"{first}/surface.csv"), table[table["slice"] == 0])
    table = table[table["slice"] == 1]
    np.testing.assert_allclose(sorted(table["a"].unique()), np.linspace(-0.5, 0.5, g))
    assert info["center"]["step"] == last and info["center"]["lam"] == lam and info["lam"] == lam
    model = load_micro_model(p, root, lam, last)
    train = load_blocks(layout.fmt(layout.SPLIT, root, dataset="micro", split="train"))
    blocks = train[torch.from_numpy(set_ids(p, train.shape[0]))]
    want = _hf_F(model, blocks, lam)
    centre = table[(table["a"].abs() < 1e-12) & (table["b"].abs() < 1e-12)]
    assert len(centre) == 1
    assert float(centre["F"].iloc[0]) == pytest.approx(want, rel=1e-5)
    assert info["F_center"] == pytest.approx(want, rel=1e-5)
    assert info["per_slice"][1]["F_min"] == pytest.approx(table["F"].min()) and table["F"].min() <= info["F_center"]
    assert info["directions"]["norms"][0] > 0 and abs(info["directions"]["cosine"]) < 0.5
    np.testing.assert_allclose(table["F"], table["loss"] + 0.5 * lam * table["theta_sq"], rtol=1e-12)


def test_surface_does_not_move_the_weights(micro):
    p, root = micro
    model = load_micro_model(p, root, 0.01, 12, dtype=torch.float32)
    theta0 = {n: q.detach().clone() for n, q in model.named_parameters()}
    before = {n: q.detach().clone() for n, q in model.named_parameters()}
    gen = torch.Generator().manual_seed(0)
    d1, d2 = filter_normalized_direction(theta0, gen), filter_normalized_direction(theta0, gen)
    x = torch.randint(0, model.config.vocab_size, (3, 16), generator=torch.Generator().manual_seed(1))
    t = surface(model, [x], theta0, d1, d2, np.linspace(-1, 1, 3), 0.0)
    t2 = surface(model, [x], theta0, d1, d2, np.linspace(-1, 1, 3), 0.0)
    for n, q in model.named_parameters():
        assert torch.equal(q, before[n])
    pd.testing.assert_frame_equal(t, t2)  # evaluating twice gives identical values: nothing drifts
    assert t["loss"].nunique() > 1


def _table(f, n=11):
    ax = np.linspace(-1, 1, n)
    return pd.DataFrame([(a, b, f(a, b)) for a in ax for b in ax], columns=["a", "b", "F"])


def test_slice_shape_of_a_bowl_a_valley_two_minima_and_an_edge_minimum():
    from villani.measure.landscape_shape import local_minima, quadratic_isotropy, radial_slope, unique_minimum

    bowl = _table(lambda a, b: 2 * a * a + 2 * b * b + 0.5 * a * b)
    valley = _table(lambda a, b: 4 * (a - b) ** 2 + 0.01 * (a + b) ** 2)
    two = _table(lambda a, b: (a * a - 0.36) ** 2 + b * b)  # minima at a = ±0.6
    edge = _table(lambda a, b: (a - 1.5) ** 2 + b * b)  # the minimum lies beyond the grid
    saddle = _table(lambda a, b: a * a - b * b)
    # bowl: Hessian [[4, .5], [.5, 4]] → μ 3.5, 4.5
    assert quadratic_isotropy(bowl) == pytest.approx(3.5 / 4.5) and unique_minimum(bowl)
    assert quadratic_isotropy(valley) == pytest.approx(0.02 / 8.0, rel=1e-6)
    assert len(local_minima(two.pivot_table(index="a", columns="b", values="F").to_numpy())) == 2
    assert not unique_minimum(two) and not unique_minimum(edge) and quadratic_isotropy(saddle) is None
    assert not unique_minimum(saddle)
    # radial slopes (10th percentile, outer half): the bowl rises everywhere, the valley floor
    # hardly (0.04), the saddle falls along b
    assert radial_slope(bowl) > 1.0 > 0.1 > radial_slope(valley) > 0.0 > radial_slope(saddle)
