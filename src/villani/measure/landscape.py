r"""2-D loss surfaces around checkpoints (Fig 3): ``results/landscape/{dataset}/lam{lam}/surface.{csv,json}``.

F(θ₀ + a·δ₁ + b·δ₂) = L + (λ/2)‖θ₀ + a·δ₁ + b·δ₂‖² for a, b ∈ linspace(−span, span, grid),
L on the fixed measurement set (:mod:`villani.measure.measurement_set`), evaluated with
``torch.func.functional_call`` — the model's own weights are never modified, so there is
no drift from repeated in-place updates — without gradients; ‖θ‖² in float64 and F from
them by the engine's :func:`~villani.curvature.operators.objective.regularised_loss`. λ is the
job's, a ``landscape.lambdas`` value: the paper's 0 and our λ matched to its 10⁻³ by
λ·η·T (:func:`villani.plan.paper_lambda.match`) — the penalty at the λ the runs trained with.

Centres θ₀ (:func:`villani.plan.runs.landscape_centres`): for each kind of
``landscape.centers`` and every seed s of ``train.seeds``, the AdamW run of λ (λ if λ ∈
``train.lambdas`` else ``train.lambdas[0]``) at step 0 (``init``: the initialisation the
run started from — Fig 3's caption draws its slices "around the initialization point θ₀";
the Fig 3 claims) or at its last checkpoint (``final``: the trained θ; our findings). A
run's initialisation is seeded by s alone, so at ``init`` every λ's surface of seed s is
centred on the same θ₀ and, with the same directions, F_λ − F₀ is the penalty alone.

Slices: ``landscape.slices`` independent pairs of directions per centre, every one on the
same grid, drawn from a generator seeded by ``landscape.seed``·1,000,003 + s (slice k after
slice k − 1): a seed's slices are the same draws at every λ and at both centres (each
scaled to its own θ₀), different seeds' independent. F on a slice is exact, the slice is
the random part, so the claims (:mod:`villani.claims.catalogue.fig3`) treat the slices as their
units and the figure draws slice 0. A job evaluates F at centres × slices × grid² points
(``evaluations`` in the record): 2 centres × 2 seeds × 5 slices × 121 = 2,420 per λ on params.yaml.

Directions (Li et al. 2018, "Visualizing the loss landscape of neural nets"): δ = Gaussian
draws (δ₁ then δ₂, tensor by tensor in parameter order), *filter-normalised*: for every
tensor with ≥ 2 dimensions, each slice along its output-unit axis — an output unit of an
``nn.Linear`` weight (stored ``(out, in)``: dim 0) or of a transformers ``Conv1D`` weight
(GPT-2's attention and MLP, stored ``(in, out)``: dim 1, :func:`output_unit_dims`), a token
row of the ``(vocab, hidden)`` embedding, a position row of the position embedding — is
rescaled to the norm of the same slice of θ₀; 1-D tensors (biases, LayerNorm/RMSNorm) are
zeroed. The surface is thus invariant to the per-unit rescalings a network is insensitive
to, and ‖δ₁‖ = ‖δ₂‖ = the norm of θ₀'s ≥ 2-D tensors.
"""

from __future__ import annotations

import logging
import time
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from villani.curvature import regularised_loss
from villani.io import records
from villani.io.finite import check_finite
from villani.io.tables import write as write_table
from villani.measure.measurement_set import mean_token_loss, measurement_batches
from villani.model.causal_lm import pick_device
from villani.plan import layout
from villani.plan.frozen import Params
from villani.plan.runs import LandscapeCentre, landscape_centres
from villani.runtime.progress import Progress
from villani.training.checkpoint import load_run_model

__all__ = ["run_landscape", "filter_normalized_direction", "output_unit_dims", "surface", "direction_seed"]

log = logging.getLogger(__name__)


def output_unit_dims(model: torch.nn.Module) -> dict[str, int]:
    """Parameter name → the axis that indexes output units: 1 for the weight of a
    transformers ``Conv1D`` (stored ``(in, out)``), 0 for every other parameter."""
    from transformers.pytorch_utils import Conv1D

    return {f"{mod}.weight" if mod else "weight": 1 for mod, m in model.named_modules() if isinstance(m, Conv1D)}


def filter_normalized_direction(theta0: Mapping[str, torch.Tensor], gen: torch.Generator,
                                unit_dims: Mapping[str, int] | None = None) -> dict[str, torch.Tensor]:
    """A Gaussian direction with each output-unit slice (along ``unit_dims[name]``, default
    0) rescaled to θ₀'s slice norm; 1-D tensors zero. Drawn and scaled on the CPU in float64
    (``gen`` is a CPU generator), so a direction is the same whichever device θ₀ is on."""
    unit_dims = unit_dims or {}
    out = {}
    for name, w in theta0.items():
        g = torch.randn(w.shape, generator=gen, dtype=torch.float64)
        if w.dim() < 2:
            out[name] = torch.zeros_like(w)
            continue
        axis = int(unit_dims.get(name, 0))
        units_g = g.movedim(axis, 0)
        rows_g = units_g.reshape(w.shape[axis], -1)
        rows_w = w.detach().to("cpu", torch.float64).movedim(axis, 0).reshape(w.shape[axis], -1)
        scale = rows_w.norm(dim=1, keepdim=True) / rows_g.norm(dim=1, keepdim=True).clamp_min(1e-300)
        out[name] = (rows_g * scale).reshape(units_g.shape).movedim(0, axis).to(device=w.device, dtype=w.dtype)
    return out


def _norm(t: Mapping[str, torch.Tensor]) -> float:
    return float(sum(v.double().square().sum() for v in t.values()) ** 0.5)


def _dot(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> float:
    return float(sum((a[k].double() * b[k].double()).sum() for k in a))


def surface(model: torch.nn.Module, batches, theta0: Mapping[str, torch.Tensor], d1, d2, axis: np.ndarray,
            lam: float, progress: Progress | None = None) -> pd.DataFrame:
    """Rows (a, b, loss, F, theta_sq) of F on the grid θ₀ + a·δ₁ + b·δ₂ (``progress`` advances per point)."""
    rows = []
    for a in axis:
        for b in axis:
            state = {k: theta0[k] + float(a) * d1[k] + float(b) * d2[k] for k in theta0}
            loss, _ = mean_token_loss(model, batches, state)
            tsq = float(sum(v.double().square().sum() for v in state.values()))
            rows.append({"a": float(a), "b": float(b), "loss": loss, "F": regularised_loss(loss, tsq, lam),
                         "theta_sq": tsq})
            if progress is not None:
                progress.update(advance=1, F=rows[-1]["F"])
    return pd.DataFrame(rows)


def _slice(model, batches, theta0, gen, units, axis, lam, bar) -> tuple[pd.DataFrame, dict]:
    """One slice: two directions drawn from ``gen`` (δ₁ then δ₂) and F on the grid; its table
    and its record (directions, grid minimum)."""
    d1 = filter_normalized_direction(theta0, gen, units)
    d2 = filter_normalized_direction(theta0, gen, units)
    table = surface(model, batches, theta0, d1, d2, axis, lam, progress=bar)
    imin = int(table["F"].idxmin())
    return table, {"directions": {"norms": [_norm(d1), _norm(d2)], "cosine": _dot(d1, d2) / (_norm(d1) * _norm(d2))},
                   "F_min": float(table["F"].iloc[imin]), "F_max": float(table["F"].max()),
                   "argmin": {"a": float(table["a"].iloc[imin]), "b": float(table["b"].iloc[imin])}}


def direction_seed(landscape_seed: int, run_seed: int) -> int:
    """The seed of the generator a centre's directions are drawn from: ``landscape.seed``·1,000,003 + s."""
    return landscape_seed * 1_000_003 + run_seed


def _centre_surfaces(params: Params, root, centre: LandscapeCentre, lam: float, device, batches, axis,
                     bar) -> tuple[pd.DataFrame, dict, int]:
    """The ``landscape.slices`` slices around one centre: (their table, the centre's record, d)."""
    run, la = centre.run, params.landscape
    model, meta = load_run_model(params, root, run, centre.step, device)
    theta0 = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    seed = direction_seed(la.seed, run.seed)
    gen, units = torch.Generator().manual_seed(seed), output_unit_dims(model)
    tables, per_slice = [], []
    for k in range(la.slices):
        table, rec = _slice(model, batches, theta0, gen, units, axis, lam, bar)
        tables.append(table.assign(center=centre.kind, seed=run.seed, slice=k))
        per_slice.append(rec)
    loss0, _ = mean_token_loss(model, batches)
    tsq0 = float(sum(v.double().square().sum() for v in theta0.values()))
    record = {"kind": centre.kind, "variant": run.variant, "lam": run.lam, "seed": run.seed, "step": centre.step,
              "weights_sha256": meta["weights_sha256"], "checkpoint": str(run.path(layout.CKPT_DIR, root, step=centre.step)),
              "theta0_sq_norm": tsq0, "loss_center": loss0, "F_center": regularised_loss(loss0, tsq0, lam),
              "direction_seed": seed, "per_slice": per_slice}
    return pd.concat(tables, ignore_index=True), record, int(sum(v.numel() for v in theta0.values()))


def run_landscape(params: Params, lam: float, root="results", device: str | None = None) -> str:
    """Compute the surfaces of F for λ = ``lam`` around every centre (:func:`landscape_centres`),
    ``landscape.slices`` each; write surface.csv (columns center, seed, slice, a, b, loss, F,
    theta_sq) then surface.json (each centre's record under ``centres``, in the same order);
    return the folder."""
    t0 = time.perf_counter()
    la, me, ds = params.landscape, params.measure, params.data.name
    centres = landscape_centres(params, lam)
    dev = pick_device(device)
    ids, batches = measurement_batches(params, root, dev)
    axis = np.linspace(-la.span, la.span, la.grid)
    evaluations = len(centres) * la.slices * len(axis) ** 2
    tables, records_, d = [], [], 0
    with Progress(f"landscape {ds} λ={layout.format_lam(lam)}", evaluations, unit="point", logger=log) as bar:
        for centre in centres:
            table, rec, d = _centre_surfaces(params, root, centre, lam, dev, batches, axis, bar)
            tables.append(table)
            records_.append(rec)
    table = pd.concat(tables, ignore_index=True)[["center", "seed", "slice", "a", "b", "loss", "F", "theta_sq"]]
    where = str(layout.fmt(layout.LANDSCAPE_DIR, root, dataset=ds, lam=lam))
    check_finite(table[["loss", "F"]].to_numpy(), where, "surface values")
    info = {
        "dataset": ds, "lam": lam, "d": d, "centres": records_,
        "directions": {"kind": "filter-normalised Gaussian (Li et al. 2018): output-unit slices of ≥2-D tensors "
                               "rescaled to θ₀'s slice norms, 1-D tensors zero; a centre's slice k draws δ₁, δ₂ after "
                               "slice k − 1 from a generator seeded landscape.seed·1,000,003 + its run's seed",
                       "seed": la.seed},
        "grid": la.grid, "span": la.span, "levels": la.levels, "axis": axis.tolist(),
        "slices": la.slices, "evaluations": evaluations,
        "measurement_set": {"blocks": len(ids), "set_seed": me.set_seed, "ids": ids.tolist()},
        "seconds": round(time.perf_counter() - t0, 3),
    }
    check_finite(info, where)
    out = layout.fmt(layout.LANDSCAPE_DIR, root, dataset=ds, lam=lam)
    write_table("surface", layout.fmt(layout.SURFACE_CSV, root, dataset=ds, lam=lam), table)
    records.write_record(layout.fmt(layout.SURFACE_JSON, root, dataset=ds, lam=lam), info, "surface")
    return str(out)
