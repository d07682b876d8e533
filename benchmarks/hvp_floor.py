"""What an exact Hessian-vector product can cost with the gradient graph kept.

An exact product by reverse-over-reverse (autograd's double backward, PyHessian's route and
ours) or forward-over-reverse with the primal cached performs, for every matrix product
``A B`` of the forward pass, six products of the same size: the tangent forward
``Ȧ B + A Ḃ`` and the tangent backward of ``∂A = G Bᵀ``, ``∂B = Aᵀ G`` (``Ġ Bᵀ + G Ḃᵀ``,
``Ȧᵀ G + Aᵀ Ġ``). No exact product does fewer multiply-adds. This script measures, at one
model and batch, side by side in interleaved rounds:

- **PyHessian** (plain autograd, graph kept: ``grad(create_graph=True)`` once, then its
  ``hessian_vector_product``) and **ours** (``ModelHessian``, graph kept);
- **its matrix products alone**: every ``mm``/``bmm``/``addmm`` PyHessian's product calls
  (recorded by ``torch.profiler`` with their shapes), replayed on random operands of the
  same shapes — the matmul time of the product with nothing else. The script checks that
  these are 6.00× the forward pass's multiply-adds (nothing wasted, nothing missing). Their
  time over PyHessian's whole product is the **floor** of the ratio any exact product can
  reach without faster matrix products;
- with ``--linearize``, **a compiled linearized product**, the other route to an exact
  product with the primal cached: ``torch.func.linearize`` of ``torch.func.grad`` of the
  same loss (forward and first backward traced once; every value free of v — activations,
  cotangents, factors such as ``1 − tanh²`` of a GELU — folded into constants of a tangent
  graph, so a product runs only the tangent operations), then ``torch.compile`` (inductor
  fuses the elementwise tangent operations). Printed with its one-time cost (trace +
  compile, cold: a fresh inductor cache) against autograd's graph build, its error against
  PyHessian's product, the number of products after which it would have paid for itself,
  and the peak tensor memory of a build + first product next to autograd's
  (``villani.measure.hvp_cost.PeakMemory``). Not part of ``villani``: measured at 125M it
  was no faster than autograd's product and held 5× its memory (``benchmarks/README.md``).

    python benchmarks/hvp_floor.py --model gpt-neo-125m --batch 1 --seq 256 --threads 1 --repeats 2 --linearize
    python benchmarks/hvp_floor.py --threads 1     # the small GPT-Neo of hvp.py, seconds

Requires the test-only anchors: ``pip install --no-deps -r requirements/oracle.txt``; for
``--linearize`` on the CPU a C++ compiler (inductor).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

# a cold compile: inductor's cache in a fresh folder (read when torch is imported)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-cold-"))
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.hvp import add_model_args, build_model, peak_bytes, timed_wall_cpu  # noqa: E402
from tests.curvature.cases import ShiftedLogits, shifted_targets  # noqa: E402
from villani.curvature import ModelHessian, causal_lm_token_loss  # noqa: E402
from villani.curvature.probes import rademacher_rows  # noqa: E402

MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm")


def matmul_calls(fn) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """``(operator, input shapes)`` of every matrix product ``fn()`` runs, in order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    return [(e.name, tuple(tuple(s) for s in e.input_shapes if s)) for e in prof.events()
            if e.name in MATMUL_OPS and e.input_shapes]


def multiply_adds(op: str, shapes: tuple[tuple[int, ...], ...]) -> int:
    """Multiply-adds of one matrix product: ``mm`` (a×b)(b×c), ``bmm`` n·(a×b)(b×c), ``addmm``
    / ``baddbmm``: the same on their last two operands."""
    a, b = shapes[-2], shapes[-1]
    batch = a[0] if len(a) == 3 else 1
    return batch * a[-2] * a[-1] * b[-1]


def replay(calls, device: str):
    """A callable running the same matrix products as ``calls`` on random operands of the same
    shapes (one set of operands per call, allocated here, so the replay allocates nothing)."""
    gen = torch.Generator(device=device).manual_seed(0)
    operands = [(op, [torch.randn(s, generator=gen, device=device) for s in shapes]) for op, shapes in calls]

    def run() -> None:
        for op, ts in operands:
            if op == "aten::mm":
                torch.mm(ts[0], ts[1])
            elif op == "aten::bmm":
                torch.bmm(ts[0], ts[1])
            elif op == "aten::baddbmm":
                torch.baddbmm(ts[0], ts[1], ts[2])
            else:
                torch.addmm(ts[0], ts[1], ts[2])
    return run


def linearized_product(model, x, params):
    """``(product, its build)``: ``product(v_list)`` -> per-tensor ``∇²F v`` of the mean token
    loss from the compiled linearized gradient; ``build()`` traces it (compiled on the first
    product). The attention mask is passed explicitly: without it transformers looks for
    packed sequences in the data, a branch that tracing cannot follow."""
    from torch.func import functional_call, grad, linearize

    names = [n for n, p in model.named_parameters() if p.requires_grad]
    n_tokens = x.shape[0] * (x.shape[1] - 1)
    kwargs = {"input_ids": x, "use_cache": False, "attention_mask": torch.ones_like(x)}
    state = {}

    def loss(ps):
        logits = functional_call(model, dict(zip(names, ps)), args=(), kwargs=kwargs).logits
        return causal_lm_token_loss(logits, x) / n_tokens

    def build():
        state.clear()  # the previous constants go first
        state["tangent"] = torch.compile(linearize(grad(loss), tuple(p.detach() for p in params))[1])

    return (lambda v_list: state["tangent"](tuple(v_list))), build


def main(argv=None) -> None:
    from pyhessian.utils import hessian_vector_product

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--linearize", action="store_true", help="also the compiled linearized product (minutes at 125M)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message="Attempted to insert a get_attr Node")  # linearize's folding, per trace
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")
    model = build_model(args).requires_grad_(True)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(args.seed))
    x = x.to(args.device)
    params = [p for p in model.parameters() if p.requires_grad]
    v = rademacher_rows(1, sum(p.numel() for p in params), seed=args.seed, dtype=torch.float32, device=args.device)[0]
    v_list = [c.view_as(p) for c, p in zip(torch.split(v, [p.numel() for p in params]), params)]
    print(f"GPT-Neo d={v.numel():,} ({args.layers} layers, hidden {args.hidden}, vocab {args.vocab}); "
          f"batch {args.batch}×{args.seq} tokens; device {args.device}; threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; medians of {args.repeats} interleaved rounds", flush=True)

    shifted, target = ShiftedLogits(model), shifted_targets(x)

    def loss():
        return torch.nn.functional.cross_entropy(shifted(x), target)

    build = [timed_wall_cpu(lambda: torch.autograd.grad(loss(), params, create_graph=True), args.device)[0]
             for _ in range(2)]
    graph = torch.autograd.grad(loss(), params, create_graph=True)
    pyhessian = lambda: hessian_vector_product(graph, params, v_list)  # noqa: E731
    reference = pyhessian()
    ours = ModelHessian(model, [x])
    ours.matvec(v)

    calls = matmul_calls(pyhessian)
    with torch.no_grad():
        forward = matmul_calls(loss)
    product_macs, forward_macs = (sum(multiply_adds(*c) for c in cs) for cs in (calls, forward))
    print(f"PyHessian's product: {len(calls)} matrix products, {product_macs / 1e9:.2f} G multiply-adds "
          f"= {product_macs / forward_macs:.2f} × the forward pass's ({len(forward)} products, "
          f"{forward_macs / 1e9:.2f} G)", flush=True)
    methods = {"PyHessian (plain autograd)": pyhessian, "ours (ModelHessian)": lambda: ours.matvec(v),
               "its matrix products alone": replay(calls, args.device)}
    if args.linearize:
        product, linear_build = linearized_product(model, x, params)
        once = timed_wall_cpu(lambda: (linear_build(), product(v_list)), args.device)[0]
        err = (sum(((a - b) ** 2).sum() for a, b in zip(product(v_list), reference))
               / sum((b ** 2).sum() for b in reference)) ** 0.5
        print(f"compiled linearized product: trace + compile + first product {once:.1f} s (autograd's graph "
              f"build: {statistics.median(build):.2f} s); relative error against PyHessian's product "
              f"{float(err):.1e}", flush=True)
        methods["compiled linearized product"] = lambda: product(v_list)

    samples = {n: [] for n in methods}
    names = list(methods)
    for rnd in range(args.repeats + 1):  # round 0 is the warm-up
        for n in names[rnd % len(names):] + names[: rnd % len(names)]:
            t = timed_wall_cpu(methods[n], args.device)
            if rnd:
                samples[n].append(t)
            print(f"  round {rnd} {n}: {t[0]:.3f} s wall, {t[1]:.3f} s CPU", flush=True)
    for i, clock in enumerate(("wall", "CPU")):
        med = {n: statistics.median(t[i] for t in s) for n, s in samples.items()}
        base = med["PyHessian (plain autograd)"]
        print(f"{clock} seconds per product (graph kept)      seconds   / PyHessian")
        for n in names:
            print(f"  {n:38s} {med[n]:9.3f} {med[n] / base:11.2f}")
    med = {n: statistics.median(t[0] for t in s) for n, s in samples.items()}
    if args.linearize:
        saved = med["PyHessian (plain autograd)"] - med["compiled linearized product"]
        extra = once - statistics.median(build) - med["PyHessian (plain autograd)"]
        print(f"compiled linearized product: one-time {extra:.1f} s more than autograd's build + first product; "
              + (f"repaid after {extra / saved:.0f} products" if saved > 0 else "never repaid (not faster)"))
        del methods
        peak = {"PyHessian (plain autograd)": peak_bytes(lambda: hessian_vector_product(
                    torch.autograd.grad(loss(), params, create_graph=True), params, v_list), args.device),
                "compiled linearized product": peak_bytes(lambda: (linear_build(), product(v_list)), args.device)}
        print("peak tensor memory above the start, build + first product (the compile cached by then): "
              + ", ".join(f"{n} {b / 2**30:.2f} GiB" for n, b in peak.items()))


if __name__ == "__main__":
    main()
