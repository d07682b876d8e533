"""2-D landscape (Fig 3): filter-normalised directions, centre value, no weight drift."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.measure.conftest import load_micro_model, micro_params, set_ids
from villani.data import load_blocks
from villani.measure.landscape import (
    direction_seed,
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


#: micro's λ matched to the paper's 10⁻³ by λ·η·T: 1e-3 · 1e-4 · 84,000 / (0.02 · 12)
PAPER_MIDDLE = 0.035


@pytest.fixture(scope="module")
def two_seeds(micro, tmp_path_factory):
    """(params, root): the micro corpus, runs λ ∈ {0, 0.035} × seeds {0, 1} trained; the landscape
    around θ₀ and the trained θ of every seed, 2 slices each."""
    from villani.plan.schedule import segment_ends
    from villani.training import train_segment

    _, micro_root = micro
    root = tmp_path_factory.mktemp("landscape-two-seeds")
    shutil.copytree(layout.fmt(layout.DATA_DIR, micro_root, dataset="micro"), layout.fmt(layout.DATA_DIR, root, dataset="micro"))
    p = micro_params(train={"lambdas": [0.0, PAPER_MIDDLE], "seeds": [0, 1], "langevin": {"lambdas": []}},
                     landscape={"lambdas": [0.0, PAPER_MIDDLE], "centers": ["init", "final"], "slices": 2})
    for lam in p["train"]["lambdas"]:
        for seed in p["train"]["seeds"]:
            for end in segment_ends(p["train"]):
                train_segment(p, variant="adamw", lam=lam, seed=seed, end=end, root=root, device="cpu", progress=False)
    for lam in p["landscape"]["lambdas"]:
        run_landscape(p, lam, root, "cpu")
    return p, root


def _surface(p, root, lam):
    d = layout.fmt(layout.LANDSCAPE_DIR, root, dataset="micro", lam=lam)
    return pd.read_csv(d / "surface.csv"), json.loads((d / "surface.json").read_text())


def test_every_seed_is_a_centre_at_its_initialisation_and_its_last_checkpoint(two_seeds):
    """Centres: init then final, seeds 0 and 1 within; each centre's slices; F at the grid's centre is
    F(θ₀) of that checkpoint, computed by transformers' own loss."""
    p, root = two_seeds
    g, last = p["landscape"]["grid"], p["train"]["steps"]
    table, info = _surface(p, root, PAPER_MIDDLE)
    assert list(table.columns) == ["center", "seed", "slice", "a", "b", "loss", "F", "theta_sq"]
    assert len(table) == info["evaluations"] == 2 * 2 * 2 * g * g
    assert [(c["kind"], c["seed"], c["step"]) for c in info["centres"]] == [
        ("init", 0, 0), ("init", 1, 0), ("final", 0, last), ("final", 1, last)]
    train = load_blocks(layout.fmt(layout.SPLIT, root, dataset="micro", split="train"))
    blocks = train[torch.from_numpy(set_ids(p, train.shape[0]))]
    for c in info["centres"]:
        rows = table[(table["center"] == c["kind"]) & (table["seed"] == c["seed"])]
        assert sorted(rows["slice"].unique()) == [0, 1] and len(c["per_slice"]) == 2
        want = _hf_F(load_micro_model(p, root, PAPER_MIDDLE, c["step"], seed=c["seed"]), blocks, PAPER_MIDDLE)
        at0 = rows[(rows["a"].abs() < 1e-12) & (rows["b"].abs() < 1e-12)]
        assert len(at0) == 2 and np.allclose(at0["F"], want, rtol=1e-5) and c["F_center"] == pytest.approx(want, rel=1e-5)
        assert c["per_slice"][1]["F_min"] == pytest.approx(rows[rows["slice"] == 1]["F"].min())
        assert c["direction_seed"] == direction_seed(p["landscape"]["seed"], c["seed"])
    np.testing.assert_allclose(table["F"], table["loss"] + 0.5 * PAPER_MIDDLE * table["theta_sq"], rtol=1e-12)
    # different seeds: different θ₀ and independent directions
    init = [c for c in info["centres"] if c["kind"] == "init"]
    assert init[0]["weights_sha256"] != init[1]["weights_sha256"]
    assert init[0]["per_slice"][0]["directions"]["cosine"] != init[1]["per_slice"][0]["directions"]["cosine"]


def test_around_theta0_the_lambdas_differ_by_the_penalty_alone(two_seeds):
    """A run's initialisation is seeded by its seed alone: around θ₀ the λ = 0 and λ > 0 surfaces of a
    seed share θ₀ and directions, so their L is the same and F_λ − F_0 = (λ/2)‖θ‖² — the part of
    Fig 3's contrast that is by construction. Around the trained θ they are different points."""
    p, root = two_seeds
    (t0, i0), (t1, i1) = _surface(p, root, 0.0), _surface(p, root, PAPER_MIDDLE)
    init0, init1 = (t[t["center"] == "init"].reset_index(drop=True) for t in (t0, t1))
    assert [c["weights_sha256"] for c in i0["centres"][:2]] == [c["weights_sha256"] for c in i1["centres"][:2]]
    np.testing.assert_array_equal(init0["loss"], init1["loss"])
    np.testing.assert_allclose(init1["F"] - init0["F"], 0.5 * PAPER_MIDDLE * init0["theta_sq"], rtol=1e-12)
    fin0, fin1 = (t[t["center"] == "final"].reset_index(drop=True) for t in (t0, t1))
    assert i0["centres"][2]["weights_sha256"] != i1["centres"][2]["weights_sha256"]
    assert not np.allclose(fin0["loss"], fin1["loss"])


def test_one_slice_is_the_first_of_two(two_seeds, tmp_path):
    """Slice k is drawn after slice k − 1 from the centre's generator: one slice is slice 0 of two."""
    p, root = two_seeds
    table, _ = _surface(p, root, 0.0)
    one = resolve({**p, "landscape": {**p["landscape"], "slices": 1, "lambdas": [0.0]}})
    for sub in ("data", "runs"):
        shutil.copytree(root / sub, tmp_path / sub)
    got = pd.read_csv(Path(run_landscape(one, 0.0, tmp_path, "cpu")) / "surface.csv")
    pd.testing.assert_frame_equal(got, table[table["slice"] == 0].reset_index(drop=True))


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
