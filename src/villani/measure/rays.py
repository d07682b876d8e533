r"""Ψ_s along radial rays θ(r) = r·u (Fig 2): ``results/rays/{dataset}/rays.csv`` + ``slopes.json``.

Directions: ``rays.count`` Gaussian directions normalised to ‖u‖ = 1 (seeded by
``rays.seed``; kind ``random``) and, with ``rays.through_checkpoint``, u = θ_c/‖θ_c‖
through the last checkpoint θ_c of (adamw, ``train.lambdas[0]``, ``train.seeds[0]``)
(kind ``checkpoint``). Every coordinate of θ moves — embeddings, attention, MLP,
LayerNorm, biases (SPEC §1: θ is every trainable parameter). Radii: ‖θ‖² = r² on a log
grid of ``rays.points`` values in [``theta_sq_min``, ``theta_sq_max``]. Model: the
architecture of the runs (its weights are overwritten by r·u); data: the fixed
measurement set of :mod:`villani.measure.measurement_set`.

At every point the L-quantities are computed once, on the Hessian of L (the operator at λ
= 0, whose :meth:`~villani.curvature.HessianOperator.objective` gives every λ's F and ∇F
by :meth:`~villani.curvature.operators.objective.Objective.at`) — L, ∇L, θ·∇L, ‖∇_g L‖² per parameter
group g of :mod:`villani.measure.parameter_groups` (``grad_L_sq:<group>``: which groups make
‖∇L‖ grow along a ray, eq. 17's premise; they sum to ``grad_L_sq``), and tr ∇²L by
Hutchinson with ``rays.num_probes`` Rademacher probes of ``rays.seed`` (the same probes at
every point and for every λ); with ``rays.deflation_steps`` = k > 0, a k-step Lanczos run
of ∇²L from probe 0 first gives tr(QᵀHQ) exactly and the probes 1, 2, … estimate only the
remainder (:mod:`villani.curvature.trace.deflated_hutchinson`; k + num_probes HVPs per point).
Along random rays at large radii a few huge eigenvalues of either sign carry most of
‖∇²L‖_F², so this cuts the trace's standard error — the noise that dominates the fitted
slopes there — several-fold at the same number of products (measured on the default
model: ×0.4–0.85 at ‖θ‖² ≥ 10⁵ with k = 4 of 8 products, ×0.03–0.4 with k = 8 of 16; at
small radii, where the trace is small anyway, up to ×1.4). Every λ of ``rays.lambdas``
is assembled exactly:

.. math::
    \Delta F = \operatorname{tr}\nabla^2 L + \lambda d,\qquad
    \|\nabla F\|^2 = \|\nabla L + \lambda\theta\|^2,\qquad
    \Psi_s = -\Delta F + \|\nabla F\|^2/s .

**Slopes.** For each λ, s and ray, :func:`villani.statistics.samples.fit_slope` fits Ψ_s against ‖θ‖²
(linear space) over the ``rays.fit_points`` largest radii, and sets it beside λ²/s (the
asymptote of ‖λθ‖²/s the paper quotes) and λ²/(2s) (what Lemma 4 proves,
:func:`villani.diagnostics.psi.psi_slope_reference`). Because a line fit is linear in y, the
slope splits exactly into the slopes of its parts,

.. math::
    \underbrace{\tfrac{\|\nabla L\|^2}{s}}_{\text{grad\_L}}
    + \underbrace{\tfrac{2\lambda\,\theta\cdot\nabla L}{s}}_{\text{cross}}
    + \underbrace{\tfrac{\lambda^2\|\theta\|^2}{s}}_{=\lambda^2/s}
    \;\underbrace{-\operatorname{tr}\nabla^2L}_{\text{trace}}
    \;(-\lambda d:\ \text{slope } 0),

reported per fit (``slope_parts``, ``dominant_part``), so a reader sees which term makes a
slope differ from λ²/s; ``grad_term_slope`` is the slope of ‖∇F‖²/s alone (the paper's
"slope λ²/s" is its asymptote), and ``slope_stderr_from_trace`` is the standard error the
Hutchinson estimate gives the (linear) fit — the SD over probes of each probe's own slope
over √M, since the same probes are used at every radius (rays.csv keeps every probe's sample,
``trace_L_probe<j>``; :mod:`villani.measure.ray_slopes`) — at large radii the trace estimate
is heavy-tailed and this is usually the largest uncertainty. With θ
including the token embeddings, LayerNorm gains and the tied output layer, logits grow
like ‖θ‖² along a ray, L grows like a‖θ‖² and ‖∇L‖² like c‖θ‖²: the λ = 0 curve is not
flat and the grad_L and cross parts are not negligible unless λ² ≫ c (see
``docs/measurements.md``).
"""

from __future__ import annotations

import logging
import math
import time
import numpy as np
import pandas as pd
import torch

from villani.curvature import ModelHessian, deflation_from_lanczos, hutchinson, lanczos
from villani.io import records, tables
from villani.io.finite import check_finite
from villani.measure.measurement_set import measurement_batches
from villani.measure.parameter_groups import parameter_group
from villani.model.causal_lm import describe_model, model_for_run, pick_device
from villani.plan import layout
from villani.plan.frozen import Params
from villani.plan.runs import rays_center
from villani.runtime.progress import Progress
from villani.diagnostics.psi import laplacian_F, psi_column, psi_s, psi_slope_reference
from villani.measure.ray_slopes import group_grad_column, probe_column, trace_slope_stderr
from villani.statistics.samples import fit_slope
from villani.training.checkpoint import load_run_model

__all__ = ["run_rays", "ray_directions", "ray_table", "fit_slopes", "gradient_groups", "group_sizes"]

log = logging.getLogger(__name__)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).double() for p in model.parameters() if p.requires_grad])


def gradient_groups(names: list[str], blocks: Mapping[str, slice], model_type: str) -> dict[str, list[slice]]:
    """Group → the slices of the flat vector its tensors occupy (``blocks``: a Hessian's
    :meth:`~villani.curvature.HessianOperator.param_blocks`; groups in order of first appearance)."""
    out: dict[str, list[slice]] = {}
    for n in names:
        out.setdefault(parameter_group(n, model_type), []).append(blocks[n])
    return out


def group_sizes(model: torch.nn.Module) -> dict[str, int]:
    """Group → its number of trainable parameters (slopes.json ``gradient_groups``)."""
    out: dict[str, int] = {}
    for n, p in model.named_parameters():
        if p.requires_grad:
            g = parameter_group(n, model.config.model_type)
            out[g] = out.get(g, 0) + p.numel()
    return out


def _group_grad_sq(grad: torch.Tensor, groups: Mapping[str, list[slice]]) -> dict[str, float]:
    """{``grad_L_sq:<group>``: Σ over the group's slices of ∇L²} — a partition of ‖∇L‖²."""
    return {group_grad_column(g): float(sum(grad[sl].square().sum() for sl in sls)) for g, sls in groups.items()}


def ray_directions(params: Params, root, model: torch.nn.Module) -> tuple[list[dict], dict | None]:
    """[{ray, kind, u}] (u float64, unit norm) and the checkpoint description (or None)."""
    r = params.rays
    d = sum(p.numel() for p in model.parameters() if p.requires_grad)
    gen = torch.Generator().manual_seed(r.seed)
    out = []
    for i in range(r.count):
        u = torch.randn(d, generator=gen, dtype=torch.float64)
        out.append({"ray": i, "kind": "random", "u": u / u.norm()})
    ckpt = None
    if r.through_checkpoint:
        run, step = rays_center(params)
        m, meta = load_run_model(params, root, run, step, device="cpu")
        theta = _flat(m)
        out.append({"ray": len(out), "kind": "checkpoint", "u": theta / theta.norm()})
        ckpt = {"variant": run.variant, "lam": run.lam, "seed": run.seed, "step": step,
                "theta_sq_norm": float(theta.square().sum()), "weights_sha256": meta["weights_sha256"]}
    return out, ckpt


def ray_table(model: torch.nn.Module, batches, directions: list[dict], theta_sq: np.ndarray, *,
              lambdas, s_values, num_probes: int, probe_seed: int, method: str = "double_backward",
              deflation_steps: int = 0, progress: Progress | None = None) -> pd.DataFrame:
    """One row per (ray, point, λ): the L-quantities once per point, every λ assembled from them
    (the trace deflated by a ``deflation_steps``-step Lanczos basis when > 0; ``progress``, if
    given, advances one unit per point)."""
    ps = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for dr in directions:
        for k, tsq in enumerate(theta_sq):
            with torch.no_grad():
                torch.nn.utils.vector_to_parameters((math.sqrt(float(tsq)) * dr["u"]).to(ps[0].dtype), ps)
            hessian_L = ModelHessian(model, batches, lam=0.0, method=method)  # ∇²L; every λ from its objective.at(λ)
            first = hessian_L.objective()
            if deflation_steps:
                basis_run = lanczos(hessian_L, deflation_steps, seed=probe_seed, keep_basis=True)
                est = hutchinson(hessian_L, num_probes, seed=probe_seed, first_probe=1,
                                 deflation=deflation_from_lanczos(basis_run))
            else:
                est = hutchinson(hessian_L, num_probes, seed=probe_seed)
            hessian_L.release()
            by_group = _group_grad_sq(first.grad_L, gradient_groups(hessian_L.names, hessian_L.param_blocks(),
                                                                    model.config.model_type))
            base = {"ray": dr["ray"], "kind": dr["kind"], "point": k, "theta_sq": first.theta_sq,
                    "loss": first.loss_L, "grad_L_sq": first.grad_L_sq, "theta_dot_grad_L": first.theta_dot_grad_L,
                    "trace_L": est.mean, "trace_L_stderr": est.stderr,
                    **{probe_column(j): float(v) for j, v in enumerate(est.samples)}, **by_group}
            check_finite(base, f"ray {dr['ray']} ({dr['kind']}) at ‖θ‖² = {tsq:g}")
            for lam in lambdas:
                at, d = first.at(lam), hessian_L.dim
                row = dict(base, lam=at.lam, F=at.F, lam_d=at.lam * d, laplacian_F=laplacian_F(est.mean, at.lam, d),
                           grad_F_sq=at.grad_F_sq)
                row.update({psi_column(s): psi_s(est.mean, at.grad_F_sq, at.lam, d, s) for s in s_values})
                rows.append(row)
            if progress is not None:
                progress.update(advance=1, ray=f"{dr['ray']} ({dr['kind']})", theta_sq=base["theta_sq"],
                                trace_L=est.mean)
    table = pd.DataFrame(rows)
    return table[tables.ordered("rays", table.columns)]


def _slope(x, y, k) -> float:
    return fit_slope(x, y, largest=k).slope


def fit_slopes(table: pd.DataFrame, s_values, fit_points: int) -> tuple[list[dict], list[dict]]:
    """Per (λ, s, ray) fits of Ψ_s vs ‖θ‖² over the ``fit_points`` largest radii, and per (λ, s) summaries."""
    fits = []
    for (lam, ray), g in table.groupby(["lam", "ray"], sort=True):
        g = g.sort_values("theta_sq")
        x = g["theta_sq"].to_numpy()
        sel = g.tail(fit_points)
        for s in s_values:
            y = g[psi_column(s)].to_numpy()
            f = fit_slope(x, y, largest=fit_points)
            ref = psi_slope_reference(lam, s)
            asym = ref["asymptote"]
            parts = {
                "grad_L": _slope(x, g["grad_L_sq"].to_numpy() / s, fit_points),
                "cross": _slope(x, 2.0 * lam * g["theta_dot_grad_L"].to_numpy() / s, fit_points),
                "lam_sq": _slope(x, lam**2 * x / s, fit_points),
                "trace": _slope(x, -g["trace_L"].to_numpy(), fit_points),
            }
            psi_fit = sel[psi_column(s)].to_numpy()
            xs = sel["theta_sq"].to_numpy()
            se_trace = trace_slope_stderr(sel)
            grad_term = parts["grad_L"] + parts["cross"] + parts["lam_sq"]
            change = f.slope * float(sel["theta_sq"].max() - sel["theta_sq"].min())
            fits.append({
                "lam": float(lam), "s": s, "ray": int(ray), "kind": str(g["kind"].iloc[0]),
                "slope": f.slope, "intercept": f.intercept, "stderr_slope": f.stderr_slope, "r2": f.r2, "n": f.n,
                "theta_sq_min": f.x_min, "theta_sq_max": float(sel["theta_sq"].max()),
                "asymptote": asym, "lemma4_lower": ref["lemma4_lower"],
                "rel_error_asymptote": (f.slope - asym) / asym if asym > 0 else None,
                "ratio_to_lemma4_lower": f.slope / ref["lemma4_lower"] if ref["lemma4_lower"] > 0 else None,
                "slope_parts": parts,
                "dominant_part": max(parts, key=lambda k: abs(parts[k])),
                "within_5pct_of_asymptote": bool(asym > 0 and abs(f.slope - asym) <= 0.05 * asym),
                "slope_stderr_from_trace": se_trace,
                "asymptote_within_2se": bool(abs(f.slope - asym) <= 2.0 * se_trace),
                "grad_term_slope": grad_term,
                "grad_term_rel_error": (grad_term - asym) / asym if asym > 0 else None,
                "trace_stderr_max": float(sel["trace_L_stderr"].max()),
                "psi_change_over_fit": change,
                "relative_change": change / float(np.mean(np.abs(psi_fit))) if np.any(psi_fit != 0) else None,
            })
    summary = []
    df = pd.DataFrame(fits)
    for (lam, s), g in df.groupby(["lam", "s"], sort=True):
        rnd = g[g["kind"] == "random"]
        ck = g[g["kind"] == "checkpoint"]
        asym = float(g["asymptote"].iloc[0])
        entry = {
            "lam": float(lam), "s": float(s), "asymptote": asym, "lemma4_lower": float(g["lemma4_lower"].iloc[0]),
            "n_random_rays": int(len(rnd)),
            "slope_mean": float(rnd["slope"].mean()) if len(rnd) else None,
            "slope_min": float(rnd["slope"].min()) if len(rnd) else None,
            "slope_max": float(rnd["slope"].max()) if len(rnd) else None,
            "checkpoint_slope": float(ck["slope"].iloc[0]) if len(ck) else None,
        }
        if asym > 0 and len(rnd):
            entry["rel_error_mean"] = (entry["slope_mean"] - asym) / asym
            entry["max_abs_rel_error"] = float(np.max(np.abs(rnd["slope"].to_numpy() - asym)) / asym)
        else:
            entry["rel_error_mean"] = entry["max_abs_rel_error"] = None
            entry["relative_change_mean"] = float(rnd["relative_change"].mean()) if len(rnd) else None
        summary.append(entry)
    return fits, summary


def run_rays(params: Params, root="results", device: str | None = None) -> str:
    """Compute every ray, write rays.csv then slopes.json; return the directory."""
    t0 = time.perf_counter()
    r, me, ds = params.rays, params.measure, params.data.name
    dev = pick_device(device)
    model = model_for_run(params, root, params.train.seeds[0])
    directions, ckpt = ray_directions(params, root, model)
    model = model.float().to(dev).eval()
    for dr in directions:
        dr["u"] = dr["u"].to(dev)
    ids, batches = measurement_batches(params, root, dev)
    theta_sq = np.geomspace(r.theta_sq_min, r.theta_sq_max, r.points)
    with Progress(f"rays {ds}", len(directions) * len(theta_sq), unit="point", logger=log) as bar:
        table = ray_table(model, batches, directions, theta_sq, lambdas=r.lambdas, s_values=me.s_values,
                          num_probes=r.num_probes, probe_seed=r.seed, method=me.hvp_method,
                          deflation_steps=r.deflation_steps, progress=bar)
    fits, summary = fit_slopes(table, me.s_values, r.fit_points)
    out_dir = layout.fmt(layout.RAYS_DIR, root, dataset=ds)
    meta = {
        "dataset": ds,
        "model": {**describe_model(model), "init": params.model.init, "name": params.model.name,
                  "note": "weights replaced by r·u at every point; every trainable parameter moves"},
        "data": {"measurement_set": {"blocks": len(ids), "set_seed": me.set_seed, "ids": ids.tolist(),
                                     "num_tokens": int(sum(b.shape[0] * (b.shape[1] - 1) for b in batches))}},
        "grid": {"theta_sq_min": r.theta_sq_min, "theta_sq_max": r.theta_sq_max, "points": r.points,
                 "theta_sq": theta_sq.tolist()},
        "lambdas": list(r.lambdas), "s_values": list(me.s_values), "num_probes": r.num_probes,
        "deflation_steps": r.deflation_steps, "seed": r.seed, "fit_points": r.fit_points, "fit_space": "linear",
        "checkpoint_ray": ckpt,
        "gradient_groups": group_sizes(model),
        "fits": fits,
        "summary": summary,
        "hvp_count": len(directions) * len(theta_sq) * (r.num_probes + r.deflation_steps),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    samples, slopes = (layout.fmt(f, root, dataset=ds) for f in (layout.RAYS_CSV, layout.RAYS_SLOPES))
    check_finite({"fits": [{k: v for k, v in f.items()} for f in fits]}, str(slopes))
    tables.write("rays", samples, table)
    records.write_record(slopes, meta, "ray_slopes")
    return str(out_dir)
