"""The theory's premises (villani.claims.catalogue.premises, derivation, chain): the statistics on inputs
with a known answer, App. A's constants and Lemma 4's square by hand, and the void marks —
a refuted premise voids exactly the rows resting on it, an inconclusive one voids nothing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.claims.conftest import REGISTERED
from villani.claims.reporting import chain
from villani.claims.catalogue.derivation import appendix_constants, paper_c2, square_threshold
from villani.claims.catalogue.premises import gradient_by_kind, growth_exponents, laplacian_max_interval, ray_points
from villani.plan import layout


def _points(exponents: dict[int, float], radii=(10.0, 100.0, 1000.0, 10_000.0)) -> pd.DataFrame:
    """rays.csv rows (two λ, as the rays stage writes them) with L = 3‖θ‖^p on ray r (p = exponents[r])
    and a gradient split over groups whose norms grow with known exponents."""
    rows = []
    for ray, p in exponents.items():
        for k, r in enumerate(radii):
            for lam in (0.0, 0.01):
                g = {"embeddings": 4.0 * r**2, "layer0.layernorm": 1.0 * r**3, "layer0.q": 2.0 * r**2,
                     "final.layernorm": 1.0 * r**3}
                rows.append({"ray": ray, "kind": "random", "lam": lam, "point": k, "theta_sq": r**2,
                             "loss": 3.0 * r**p, "grad_L_sq": sum(g.values()),
                             **{f"grad_L_sq:{n}": v for n, v in g.items()}})
    return pd.DataFrame(rows)


def test_growth_exponent_is_the_power_of_the_norm():
    pts = ray_points(_points({0: 1.4, 1: 1.5, 2: 1.6}))
    assert len(pts) == 12  # one row per point, whatever the λ
    got = growth_exponents(pts, "loss", 3)
    assert got == pytest.approx({0: 1.4, 1: 1.5, 2: 1.6}, abs=1e-12)
    # ‖∇L‖ = √Σ: over the two largest radii the r³ groups dominate
    grad = growth_exponents(pts, "grad_L_sq", 2, root=True)
    assert all(1.4 < v < 1.5 for v in grad.values())


def test_gradient_by_kind_shares_and_exponents():
    pts = ray_points(_points({0: 2.0, 1: 2.0}))
    sizes = {"embeddings": 600, "layer0.layernorm": 40, "layer0.q": 300, "final.layernorm": 60}
    k = gradient_by_kind(pts, sizes, 3).set_index("kind")
    r = 10_000.0
    total = 4 * r**2 + 2 * r**3 + 2 * r**2
    assert k.loc["layernorm", "grad_share"] == pytest.approx(2 * r**3 / total)
    assert k.loc["embeddings", "grad_share"] == pytest.approx(4 * r**2 / total)
    assert k.loc["layernorm", "param_share"] == pytest.approx(0.1) and k.loc["attention", "param_share"] == 0.3
    assert k.loc["layernorm", "exponent"] == pytest.approx(1.5) and k.loc["embeddings", "exponent"] == pytest.approx(1.0)
    assert list(k.index)[0] == "layernorm"  # sorted by share of ‖∇L‖²
    with pytest.raises(ValueError, match="grad_L_sq:<group>.*villani rays"):
        gradient_by_kind(pts.drop(columns=[c for c in pts if c.startswith("grad_L_sq:")]), sizes, 3)


def test_laplacian_max_interval_by_hand():
    g = pd.DataFrame({"trace_L": [10.0, 50.0, 40.0], "trace_L_stderr": [1.0, 20.0, 2.0]})
    iv = laplacian_max_interval(g, num_probes=4, confidence=0.99, scale=10.0)
    t = stats.t.ppf(0.995, 3)
    assert iv.estimate == 5.0 and iv.dof == 3
    assert iv.low == pytest.approx(max(10 - t, 50 - 20 * t, 40 - 2 * t) / 10)
    assert iv.high == pytest.approx(max(10 + t, 50 + 20 * t, 40 + 2 * t) / 10)
    flat = laplacian_max_interval(g.assign(trace_L_stderr=0.0), num_probes=4, confidence=0.99, scale=1.0)
    assert flat.low is None and "no interval" in flat.method


def test_appendix_constants_by_hand():
    b = 7.6 / (2 * 0.9 * (1 + 12 * 0.9 * math.sqrt(768)))
    c2 = 2 * 50_257 * b**2 * 0.9**2 + 12 * 768**2 * 0.9**2
    assert appendix_constants() == pytest.approx((b, c2)) and paper_c2() == pytest.approx(c2)
    assert 5.7e6 < c2 < 5.8e6 and 1.74e8 / c2 == pytest.approx(30.35, abs=0.01)


def test_lemma4_square_holds_from_four_c1_over_lambda():
    c1, lam = 7.6, 0.01
    x0 = square_threshold(c1, lam)
    assert x0 == pytest.approx(4 * c1 / lam)

    def holds(x):
        return x**2 - (2 * c1 / lam) * x >= 0.5 * x**2

    assert not holds(2 * c1 / lam) and not holds(0.99 * x0) and holds(x0) and holds(1.5 * x0)


def _row(i, verdict="supported", cls="measured here"):
    return {"id": i, "verdict": verdict, "class": cls}


def test_a_refuted_premise_voids_exactly_the_rows_resting_on_it():
    ids = ["eq17_grad_bounded", "eq17_grad_c1", "psi_positive_checkpoints", "fig2_slope_lam1e-2",
           "fig5_envelope_holds", "fig7_pooled_direction", "fig6_r2"]
    rows = [_row(i) for i in ids]
    rows[0]["verdict"] = "refuted"  # eq. 17 fails; eq. 22's row is supported
    status = chain.mark(rows)
    by = {r["id"]: r for r in rows}
    assert status["eq. 17"]["failed"] and status["eq. 17"]["refuted_by"] == ["eq17_grad_bounded"]
    assert not status["eq. 22"]["failed"]
    assert by["fig2_slope_lam1e-2"]["rests_on"] == "eq. 17" and by["fig2_slope_lam1e-2"]["void"] == \
        "eq. 17 (eq17_grad_bounded)"
    assert by["fig5_envelope_holds"]["rests_on"] == "eq. 17; eq. 22"
    assert by["fig5_envelope_holds"]["void"] == "eq. 17 (eq17_grad_bounded)"  # eq. 22 holds: not named
    for i in ("fig7_pooled_direction", "fig6_r2", "eq17_grad_c1"):  # observations, PAC-Bayes, the premises
        assert by[i]["rests_on"] == "" and by[i]["void"] == ""
    assert chain.void_counts(rows, ("measured here", "arithmetic")) == {"measured here": 2, "arithmetic": 0}


def test_a_refutation_holm_does_not_keep_voids_nothing():
    rows = [_row("eq17_grad_bounded", "refuted"), _row("fig2_slope_lam1e-2")]
    rows[0]["verdict_holm"] = "inconclusive"
    assert not chain.mark(rows)["eq. 17"]["failed"] and rows[1]["void"] == ""
    rows[0]["verdict_holm"] = "refuted"
    assert chain.mark(rows)["eq. 17"]["failed"] and rows[1]["void"] == "eq. 17 (eq17_grad_bounded)"


def test_an_inconclusive_premise_voids_nothing():
    rows = [_row(i, "inconclusive") for i in chain.PREMISES["eq. 17"] + chain.PREMISES["eq. 22"]]
    rows += [_row("fig5_envelope_holds", "refuted"), _row("theorem2_steps_vs_trained")]
    chain.mark(rows)
    assert all(r["void"] == "" for r in rows)
    assert {r["id"]: r["rests_on"] for r in rows}["theorem2_steps_vs_trained"] == "eq. 17; eq. 22"


def test_every_id_of_the_chain_is_a_registered_claim():
    """A renamed or removed claim must be renamed here too (its premises would silently drop)."""
    for ids in (*chain.PREMISES.values(), *(s.rows for s in chain.CHAIN)):
        for i in ids:
            assert i in REGISTERED, i
    assert "premises" in {REGISTERED[i]["module"].rsplit(".", 1)[-1] for i in chain.PREMISES["eq. 17"]}


@pytest.mark.slow  # 5 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_the_ledger_carries_premises_and_void_marks(ledger):
    p, root, rows, found = ledger
    for r in (*rows.values(), *found.values()):
        assert r["rests_on"] == "; ".join(chain.rests_on(r["id"]))
    import json

    doc = json.loads(layout.fmt(layout.CLAIMS_JSON, root, dataset=p["data"]["name"]).read_text())
    assert set(doc["premises"]) == set(chain.PREMISES)
    failed = {n for n, s in doc["premises"].items() if s["failed"]}
    assert "eq. 17" in failed  # App. A's C₂ against Table III: refuted at any scale
    void = {i for i, r in rows.items() if r["void"]}
    assert void == {i for i, r in rows.items() if set(r["rests_on"].split("; ")) & failed}
    assert sum(doc["counts_void"].values()) == len(void)


def _rewrite(root, p, fn):
    """Rewrite every measure JSON through ``fn(rec, run, step)`` as a new measurement would be written."""
    import json

    from tests.figures.synthetic import write_record
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps

    for r in runs(p):
        for step in checkpoint_steps(p["train"]):
            path = r.path(layout.MEASURE_JSON, root, step=step)
            rec = json.loads(path.read_text())
            fn(rec, r, step)
            write_record(root, p, r, step, rec)


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """A synthetic tree whose premise statistics are set by hand: L = 3‖θ‖^p on rays with p = 1.4,
    1.5, 1.6; Ψ_s > 0 at every checkpoint of exactly one λ > 0 run; the noise-injected runs' fall
    of validation loss 0.50× and 0.52× their AdamW run's (seeds 0, 1); every run learned."""
    from tests.claims.conftest import _with_baseline
    from tests.figures.conftest import figure_params
    from tests.figures.synthetic import build_results
    from villani.bounds.table import write_bounds
    from villani.claims.reporting.ledger import claim_rows
    from villani.plan.config import resolve
    from villani.diagnostics.psi import psi_key

    p = figure_params().to_dict()
    p["train"]["adamw_noise"]["lambdas"] = [0.01]
    p["rays"]["count"] = 3
    p = resolve(p)
    root = build_results(tmp_path_factory.mktemp("premises"), p, cost=False, landscape=False)
    _with_baseline(root, p)
    s = psi_key(p["measure"]["s_values"][0])
    fall = {0: 0.50, 1: 0.52}

    def set_(rec, run, step):
        plain = 5.0 - 2.0 * step / p["train"]["steps"]  # the AdamW run's validation loss: falls by 2
        rec["val_loss"] = plain if run.variant != "adamw_noise" else 5.0 - fall[run.seed] * (5.0 - plain)
        rec["val_ppl"] = math.exp(rec["val_loss"])
        keep = run.variant == "adamw" and run.lam == 0.01 and run.seed == 0
        rec["psi_s"][s] = 7.0 if keep else -3.0 - step

    _rewrite(root, p, set_)
    path = layout.fmt(layout.RAYS_CSV, root, dataset=p["data"]["name"])
    table = pd.read_csv(path)
    expo = {0: 1.4, 1: 1.5, 2: 1.6}  # the random rays; the checkpoint ray (3) is no unit
    table["loss"] = [3.0 * math.sqrt(t) ** expo.get(int(r), 3.0) for r, t in zip(table["ray"], table["theta_sq"])]
    table.to_csv(path, index=False)
    write_bounds(p, root)
    return p, {r["id"]: r for r in claim_rows(p, root)}


@pytest.mark.slow  # 4 s of `make test-fast` on 2 cores: past its 3-minute budget
def test_ledger_rows_on_known_inputs(known):
    p, rows = known
    t = stats.t.ppf(0.975, 2)
    g = rows["eq17_grad_bounded"]
    assert g["estimate"] == pytest.approx(1.5) and g["verdict"] == "refuted"
    assert g["ci_low"] == pytest.approx(1.5 - t * 0.1 / math.sqrt(3))
    runs_pos = [r for r in ("adamw", "langevin", "adamw_noise")]  # λ = 0.01, two seeds each
    n = 2 * len(runs_pos)
    ci = stats.binomtest(1, n).proportion_ci(0.95, method="exact")
    psi = rows["psi_positive_checkpoints"]
    assert psi["estimate"] == pytest.approx(1 / n) and psi["verdict"] == "refuted"
    assert (psi["ci_low"], psi["ci_high"]) == pytest.approx((ci.low, ci.high))
    noise = rows["sec6e_noise_injection"]
    logs = np.log([0.50, 0.52])
    half = stats.t.ppf(0.975, 1) * logs.std(ddof=1) / math.sqrt(2)
    assert noise["estimate"] == pytest.approx(math.exp(logs.mean()))
    assert (noise["ci_low"], noise["ci_high"]) == pytest.approx((math.exp(logs.mean() - half),
                                                                  math.exp(logs.mean() + half)))
    assert noise["verdict"] == "refuted"
    learns = rows["sec6e_noise_arm_learns"]  # a finding: both noise-injected runs learned
    assert learns["table"] == "findings" and learns["estimate"] == 1.0
    assert learns["ci_low"] == pytest.approx(stats.binomtest(2, 2).proportion_ci(0.95, method="exact").low)
    # every checkpoint's ‖∇L‖ and tr ∇²L of the synthetic tree lie far below the paper's constants
    assert rows["eq17_checkpoints"]["estimate"] == 1.0 and rows["eq17_checkpoints"]["verdict"] == "inconclusive"


def test_docs_chain_is_generated_from_the_chain():
    from tests.conftest import REPO

    text = (REPO / "docs" / "claims.md").read_text()
    listed = text.split(chain.CHAIN_START, 1)[1].split(chain.CHAIN_END, 1)[0].strip("\n") + "\n"
    assert listed == chain.chain_markdown(), (
        "docs/claims.md is out of date: python -c \"from villani.claims.reporting.chain import write_chain; "
        "write_chain('docs/claims.md')\"")


def test_laplacian_max_interval_covers_the_largest_trace_at_the_rays_design():
    """8 radii × 4 probes (the default's rays), normal probe samples of unequal spread, the points'
    intervals Bonferroni over the radii: the largest true trace is covered in ≥ 95% of 2,000 sets."""
    rng = np.random.default_rng(7)
    points, probes, alpha = 8, 4, 0.05
    hits = 0
    for _ in range(2000):
        true = rng.normal(0.0, 3.0, points)
        sd = rng.uniform(0.5, 4.0, points)
        x = true[:, None] + sd[:, None] * rng.standard_normal((points, probes))
        g = pd.DataFrame({"trace_L": x.mean(axis=1), "trace_L_stderr": x.std(axis=1, ddof=1) / math.sqrt(probes)})
        iv = laplacian_max_interval(g, probes, 1 - alpha / points, 1.0)
        hits += iv.low <= true.max() <= iv.high
    assert 0.95 <= hits / 2000 <= 1.0, hits / 2000
