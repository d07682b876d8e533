"""The whole per-checkpoint curvature measurement, ours vs PyHessian, at equal accuracy.

Outputs (paper settings unless overridden): trace by M = 64 Rademacher probes, the top-20
eigenvalues, and an SLQ spectral density (``--slq-probes`` × ``--slq-steps``).

- **ours**: ``hutchinson`` (M probes, per-tensor traces and ‖H‖_F² from the same
  products); one Lanczos run with full re-orthogonalisation from SLQ start 0 gives the
  top-20 Ritz values *and* SLQ's first node set; SLQ starts 1.. run ``--slq-steps`` each.
- **PyHessian**: ``trace(maxIter=M, tol=-inf)`` (M probes: its stopping test
  ``(mean − prev)/(prev + 1e-6) < tol`` has no ``abs`` in the denominator and fires at once
  on a negative running mean with ``tol=0``), ``eigenvalues(top_n=20)``
  (power iteration with deflation, ``maxIter=100``, ``tol=1e-3``), ``density(iter, n_v)``.

Equal accuracy: the trace and SLQ use the same number of probes/steps on both sides.
For the eigenvalues, a long Lanczos run gives reference values (Ritz residuals are
printed); PyHessian's worst relative error over its 20 values is measured, and ours is the
fewest Lanczos steps whose 20 values are all at least that accurate (Lanczos steps are
prefixes of one run, so every step count is checked for free). PyHessian finds the
largest-*magnitude* eigenvalues, so both sides are compared on those.

Cost is counted in Hessian-vector products (HVPs) and in seconds; "HVP-equivalents"
divide the wall time by the time of one of *our* HVPs (our Hutchinson phase / M, which
is nothing but products), so PyHessian's slower products count for more than one.

    python benchmarks/measure.py            # CPU, the GPT-Neo of hvp.py (d ≈ 1.02M), 8×128 tokens
    python benchmarks/measure.py --device cuda --vocab 50257 --hidden 768 --layers 12 --seq 512 --batch 8

PyHessian 0.1 calls ``torch.eig`` (removed in torch 2); this script provides it, for
symmetric T, through ``torch.linalg.eigh``.
"""

from __future__ import annotations

import argparse
import copy
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hvp import ShiftedLogits, add_model_args, build_model, shifted_targets, sync  # noqa: E402

from villani.curvature import CallableOperator, ModelHessian, hutchinson, lanczos  # noqa: E402
from villani.curvature.probes import rademacher_rows  # noqa: E402
from villani.curvature.results import LanczosResult  # noqa: E402


def _legacy_eig(T, eigenvectors=True):
    """``torch.eig`` of torch < 2 for a symmetric matrix: ((n, 2) real/imag values, vectors)."""
    vals, vecs = torch.linalg.eigh(T)
    return torch.stack([vals, torch.zeros_like(vals)], dim=1), vecs


def train(model, x, steps: int) -> None:
    """A few AdamW steps on the batch (dropout is off), then back to eval mode."""
    from villani.curvature import causal_lm_token_loss

    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        causal_lm_token_loss(model(input_ids=x, use_cache=False).logits, x).div(x[:, 1:].numel()).backward()
        opt.step()
    opt.zero_grad(set_to_none=True)
    model.eval()


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def prefix(res: LanczosResult, j: int) -> LanczosResult:
    """The j-step Lanczos result contained in a longer run (β_j = the next off-diagonal)."""
    beta_last = res.betas[j - 1] if j < res.num_steps else res.beta_last
    return LanczosResult(alphas=res.alphas[:j], betas=res.betas[: j - 1], beta_last=float(beta_last), num_matvecs=j)


def top_by_magnitude(res: LanczosResult, k: int) -> np.ndarray:
    theta, _ = res.ritz()
    return theta[np.argsort(-np.abs(theta))[:k]]


def ours_measurement(args, H: ModelHessian, counter: dict) -> dict:
    def mv(v):
        counter["n"] += 1
        return H.matvec(v)

    op = CallableOperator(mv, H.dim, dtype=H.dtype, device=H.device)
    sync(args.device)
    t0 = time.perf_counter()
    trace = hutchinson(op, args.probes, seed=0, blocks=H.param_blocks())
    sync(args.device)
    hvp_s = (time.perf_counter() - t0) / args.probes
    n_trace = counter["n"]
    starts = rademacher_rows(args.slq_probes, H.dim, seed=1, dtype=H.dtype, device=H.device)
    first = lanczos(op, max(args.top_steps, args.slq_steps), v0=starts[0])
    nodes = [first.ritz()[0]]
    for j in range(1, args.slq_probes):
        nodes.append(lanczos(op, args.slq_steps, v0=starts[j]).ritz()[0])
    sync(args.device)
    return {
        "seconds": time.perf_counter() - t0,
        "hvp_seconds": hvp_s,
        "hvps": counter["n"],
        "hvps_trace": n_trace,
        "trace": trace,
        "first_run": first,
        "basis_bytes": max(args.top_steps, args.slq_steps) * H.dim * H.flat_params().element_size(),
    }


def pyhessian_measurement(args, model, x) -> dict:
    import importlib

    ph_module = importlib.import_module("pyhessian.hessian")  # the package re-exports the class as `hessian`

    torch.eig = _legacy_eig  # PyHessian 0.1 needs the removed torch.eig
    counter = {"n": 0}
    original = ph_module.hessian_vector_product

    def counted(gradsH, params, v):
        counter["n"] += 1
        return original(gradsH, params, v)

    ph_module.hessian_vector_product = counted
    try:
        sync(args.device)
        t0 = time.perf_counter()
        ph = ph_module.hessian(ShiftedLogits(copy.deepcopy(model)), torch.nn.CrossEntropyLoss(),
                               data=(x, shifted_targets(x)), cuda=args.device.startswith("cuda"))
        samples = ph.trace(maxIter=args.probes, tol=float("-inf"))
        n_trace = counter["n"]
        torch.manual_seed(0)
        eigs, _ = ph.eigenvalues(maxIter=100, tol=1e-3, top_n=args.top_k)
        n_eigs = counter["n"] - n_trace
        ph.density(iter=args.slq_steps, n_v=args.slq_probes)
        sync(args.device)
        seconds = time.perf_counter() - t0
    finally:
        ph_module.hessian_vector_product = original
    return {"seconds": seconds, "hvps": counter["n"], "hvps_trace": n_trace, "hvps_eigs": n_eigs,
            "trace_mean": float(np.mean(samples)), "eigs": np.asarray(eigs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--probes", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--top-steps", type=int, default=80, help="Lanczos steps of start 0 (top-k + SLQ)")
    ap.add_argument("--reference-steps", type=int, default=250, help="Lanczos steps for reference eigenvalues")
    ap.add_argument("--slq-probes", type=int, default=4)
    ap.add_argument("--slq-steps", type=int, default=60)
    ap.add_argument("--train-steps", type=int, default=20,
                    help="AdamW steps on the batch first (loss 9.0 -> 4.6), so the Hessian is not that of an initialisation")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")

    model = build_model(args)
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen).to(args.device)
    train(model, x, args.train_steps)
    H = ModelHessian(model, [x])
    H.matvec(torch.zeros(H.dim, device=H.device))  # build the graph outside the timings
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()

    ours = ours_measurement(args, H, {"n": 0})
    hvp_s = ours["hvp_seconds"]
    mem_ours = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else peak_rss_gib()
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    theirs = pyhessian_measurement(args, model, x)
    mem_theirs = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else peak_rss_gib()

    # reference eigenvalues (largest magnitude) from a long run, and the accuracy match
    ref_run = lanczos(H, args.reference_steps, seed=123)
    theta, resid = ref_run.ritz_residuals()
    order = np.argsort(-np.abs(theta))[: args.top_k]
    ref, ref_resid = theta[order], resid[order]
    def rel_errors(values):
        return np.abs(np.sort(values) - np.sort(ref)) / np.abs(np.sort(ref))

    ph_rel = rel_errors(theirs["eigs"])
    ph_err = float(ph_rel.max())
    first = ours["first_run"]
    match = nominal = None
    for j in range(args.top_k, first.num_steps + 1):
        err = float(rel_errors(top_by_magnitude(prefix(first, j), args.top_k)).max())
        if match is None and err <= ph_err:
            match = (j, err)
        if nominal is None and err <= 1e-3:
            nominal = j

    print(f"GPT-Neo d={H.dim:,}; batch {args.batch}×{args.seq}; device {args.device}; threads {torch.get_num_threads()}")
    print(f"one HVP (ours, mean over the Hutchinson phase) = {hvp_s:.4f} s")
    print(f"reference top-{args.top_k} (|λ|) from {args.reference_steps} Lanczos steps: max Ritz residual "
          f"{ref_resid.max():.2e}; λ_1 = {ref[0]:.6g}, λ_{args.top_k} = {ref[-1]:.6g}")
    print(f"PyHessian top-{args.top_k}: {theirs['hvps_eigs']} HVPs, relative error worst {ph_err:.2e}, "
          f"median {np.median(ph_rel):.2e}")
    print(f"ours top-{args.top_k} to 1e-3 relative (PyHessian's nominal tol): "
          + (f"{nominal} Lanczos steps" if nominal else f"> {first.num_steps} steps"))
    if match is None:
        print(f"ours top-{args.top_k}: not reached within {first.num_steps} Lanczos steps (raise --top-steps)")
        eig_hvps = first.num_steps
    else:
        print(f"ours top-{args.top_k}: {match[0]} Lanczos steps reach worst relative error {match[1]:.2e} (≤ PyHessian's)")
        eig_hvps = match[0]
    print(f"trace: ours {ours['trace'].mean:.6g} ± {ours['trace'].stderr:.2g} (M={args.probes}, {ours['hvps_trace']} HVPs, "
          f"+{len(ours['trace'].block_names)} per-tensor traces, ‖H‖_F² = {ours['trace'].frob_sq:.4g}); "
          f"PyHessian {theirs['trace_mean']:.6g} ({theirs['hvps_trace']} HVPs)")
    # Whole measurement at equal accuracy: our top-k needs `eig_hvps` steps of start 0, which SLQ reuses.
    ours_total = args.probes + max(eig_hvps, args.slq_steps) + (args.slq_probes - 1) * args.slq_steps
    print(f"{'':10s} {'HVPs':>7s} {'seconds':>9s} {'HVP-equiv':>10s} {'peak mem GiB':>13s}")
    print(f"{'ours':10s} {ours['hvps']:7d} {ours['seconds']:9.2f} {ours['seconds'] / hvp_s:10.1f} {mem_ours:13.2f}"
          f"   (run with --top-steps {max(args.top_steps, args.slq_steps)})")
    eq_s = ours["seconds"] * ours_total / ours["hvps"]
    print(f"{'ours@eq':10s} {ours_total:7d} {eq_s:9.2f} {eq_s / hvp_s:10.1f}   (top-k at equal accuracy: {eig_hvps} "
          "steps; time scaled from the run)")
    print(f"{'PyHessian':10s} {theirs['hvps']:7d} {theirs['seconds']:9.2f} {theirs['seconds'] / hvp_s:10.1f} {mem_theirs:13.2f}")
    print(f"ratio PyHessian/ours at equal accuracy: {theirs['hvps'] / ours_total:.2f}× in HVPs, "
          f"{theirs['seconds'] / eq_s:.2f}× in HVP-equivalents (wall time); as run: {theirs['seconds'] / ours['seconds']:.2f}×")
    print(f"Lanczos basis: {ours['basis_bytes'] / 2**20:.1f} MiB on {H.device} "
          f"({max(args.top_steps, args.slq_steps)} steps × d × {H.flat_params().element_size()} B); "
          "peak memory is the process RSS high-water mark on CPU (cumulative: ours ran first)")


if __name__ == "__main__":
    main()
