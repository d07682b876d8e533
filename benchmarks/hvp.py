"""Hessian-vector product cost: villani.curvature vs PyHessian vs curvlinops.

Same GPT-Neo (eager attention, fp32, eval), same token batch, same probe vectors. Each
method's per-probe time is the median over ``--repeats`` rounds; rounds interleave the
methods (rotating order) so load drift on a shared machine hits all of them alike.

``--mode products`` (default): one product with the gradient graph kept, every variant of
ours, as multiples of one gradient (forward + backward of the same mean token
cross-entropy) measured in the same rounds, plus ours/theirs ratios.

``--mode profile``: ours vs PyHessian in each of the regimes below, under
``torch.profiler`` (CPU and, on a GPU, CUDA activity): per product the wall time, the
operators and kernels launched and their summed device time, then the operators that
differ most between the two — where an overhead of ours shows.

``--mode regimes``: ours vs PyHessian (plain autograd: ``grad(create_graph=True)``, then
PyHessian's ``hessian_vector_product``) vs curvlinops, in the three regimes a measurement
meets: *build + first product* (a fresh operator), *next product* (graph kept) and
*product with the graph rebuilt* (ours ``reuse_graph=False``; the graph of one product is
not kept — the regime of a measurement set whose graph does not fit). curvlinops keeps no
graph, so its rebuilt product is its next product. Peak memory: torch's CPU allocation
events (``villani.measure.hvp_cost.PeakMemory``) over a separate untimed build + first
product and rebuilt product, above what was live before.

    python benchmarks/hvp.py                       # CPU, tiny GPT-Neo (d ≈ 1.02M), 8×128 tokens
    python benchmarks/hvp.py --threads 1
    python benchmarks/hvp.py --device cuda --k 8   # on a GPU: batched products too
    python benchmarks/hvp.py --mode regimes --model gpt-neo-125m --batch 1 --seq 256 --threads 1 --repeats 2
    python benchmarks/hvp.py --mode profile --device cuda --model gpt-neo-125m --batch 1 --seq 512

Requires the test-only anchors: ``pip install --no-deps -r requirements/oracle.txt``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.curvature.cases import ShiftedLogits, gpt_neo, shifted_targets  # noqa: E402
from villani.curvature import ModelHessian, causal_lm_token_loss  # noqa: E402
from villani.curvature.probes import rademacher_rows  # noqa: E402


GPT_NEO_125M = dict(vocab=50257, hidden=768, layers=12, heads=12, positions=2048, window=256)
"""EleutherAI/gpt-neo-125m's architecture (its config.json: MLP 4h, gelu_new, alternating
global/local attention, tied output layer), built from the config — random weights, no hub."""


def add_model_args(ap: argparse.ArgumentParser) -> None:
    """The GPT-Neo and batch options shared with ``measure.py``."""
    ap.add_argument("--model", choices=("custom", "gpt-neo-125m"), default="custom",
                    help="gpt-neo-125m: GPT-Neo-125M's architecture (overrides --vocab/--hidden/--layers/--heads)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=96)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--seed", type=int, default=0)


def build_model(args):
    """The benchmark GPT-Neo (fp32, eager, eval) on ``args.device``."""
    if getattr(args, "model", "custom") == "gpt-neo-125m":
        arch = dict(GPT_NEO_125M)
        args.vocab, args.hidden, args.layers, args.heads = arch["vocab"], arch["hidden"], arch["layers"], arch["heads"]
    else:
        arch = dict(vocab=args.vocab, hidden=args.hidden, layers=args.layers, heads=args.heads,
                    positions=max(args.seq, 128), window=max(1, args.seq // 2))
    return gpt_neo(**arch, seed=args.seed).to(args.device)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def curvlinops_hessian(model, x):
    """curvlinops' Hessian of the same token loss (its ``HessianLinearOperator``; no graph kept)."""
    from curvlinops import HessianLinearOperator

    params = [p for p in model.parameters() if p.requires_grad]
    return HessianLinearOperator(ShiftedLogits(model), torch.nn.CrossEntropyLoss(), params,
                                 [(x, shifted_targets(x))], check_deterministic=False)


def make_methods(args, model, x, V):
    """name -> (callable doing one block of products, probes per call)."""
    from pyhessian import hessian as PyHessian
    from pyhessian.utils import hessian_vector_product

    params = [p for p in model.parameters() if p.requires_grad]
    n_tokens = x.shape[0] * (x.shape[1] - 1)
    k = args.k

    def gradient():
        loss = causal_lm_token_loss(model(input_ids=x, use_cache=False).logits, x) / n_tokens
        torch.autograd.grad(loss, params)

    setup = {}
    methods = {"gradient": (gradient, 1)}
    gradient()  # warm-up before the one-time setups are timed

    # one-time setup (forward + create_graph backward, kept for all probes): median of 3 builds
    setup["ours"] = statistics.median(timed(ModelHessian(model, [x]).data_grad, args.device) for _ in range(3))
    ours = ModelHessian(model, [x])
    ours.data_grad()
    methods["ours (double backward, fused CE, graph reuse)"] = (lambda: ours.matvec(V[0]), 1)

    plain = ModelHessian(model, [x], cross_entropy="autograd")
    plain.matvec(V[0])
    methods["ours, autograd CE"] = (lambda: plain.matvec(V[0]), 1)

    fwd = ModelHessian(model, [x], method="fwd_over_rev")
    fwd.matvec(V[0])
    methods["ours, fwd-over-rev"] = (lambda: fwd.matvec(V[0]), 1)
    if k > 1:
        fwd_vec = ModelHessian(model, [x], method="fwd_over_rev", vectorize=True)
        methods[f"ours, fwd-over-rev vmap k={k}"] = (lambda: fwd_vec.matmat(V[:k]), k)
        vec = ModelHessian(model, [x], vectorize=True)
        vec.matvec(V[0])
        methods[f"ours, is_grads_batched k={k}"] = (lambda: vec.matmat(V[:k]), k)

    target = shifted_targets(x)
    cuda = args.device.startswith("cuda")

    def pyhessian():  # a fresh copy each time: PyHessian leaves graph-carrying .grad behind
        return PyHessian(ShiftedLogits(copy.deepcopy(model)), torch.nn.CrossEntropyLoss(), data=(x, target), cuda=cuda)

    setup["pyhessian"] = statistics.median(timed(pyhessian, args.device) for _ in range(3))
    ph = pyhessian()
    sizes = [p.numel() for p in ph.params]
    v_list = [c.view_as(p) for c, p in zip(torch.split(V[0], sizes), ph.params)]
    methods["PyHessian"] = (lambda: hessian_vector_product(ph.gradsH, ph.params, v_list), 1)

    cl = curvlinops_hessian(model, x)
    methods["curvlinops"] = (lambda: cl @ V[0], 1)
    if k > 1:
        Vt = V[:k].T.contiguous()
        methods[f"curvlinops k={k}"] = (lambda: cl @ Vt, k)
    return methods, setup, ours


REGIMES = ("build + first product", "next product (graph kept)", "product, graph rebuilt")


def regime_methods(model, x, v):
    """name -> (build + first, next, rebuilt): callables doing one product each on ``v``.

    "next" continues the operator of the last "build + first" of the same method."""
    from pyhessian.utils import hessian_vector_product

    params = [p for p in model.parameters() if p.requires_grad]
    target, shifted = shifted_targets(x), ShiftedLogits(model)
    v_list = [c.view_as(p) for c, p in zip(torch.split(v, [p.numel() for p in params]), params)]
    state = {}

    def autograd_grads():  # PyHessian's build: loss.backward(create_graph=True), here without .grad
        loss = torch.nn.functional.cross_entropy(shifted(x), target)
        return torch.autograd.grad(loss, params, create_graph=True)

    def pyhessian_build_first():
        state["PyHessian"] = autograd_grads()
        return hessian_vector_product(state["PyHessian"], params, v_list)

    def ours_build_first():
        state["ours"] = ModelHessian(model, [x])
        return state["ours"].matvec(v)

    def curvlinops_build_first():
        state["curvlinops"] = curvlinops_hessian(model, x)
        return state["curvlinops"] @ v

    ours_rebuilt = ModelHessian(model, [x], reuse_graph=False)
    state["release"] = ours_rebuilt.release
    curvlinops_next = lambda: state["curvlinops"] @ v  # noqa: E731
    return {
        "ours": (ours_build_first, lambda: state["ours"].matvec(v), lambda: ours_rebuilt.matvec(v)),
        "PyHessian": (pyhessian_build_first, lambda: hessian_vector_product(state["PyHessian"], params, v_list),
                      lambda: hessian_vector_product(autograd_grads(), params, v_list)),
        "curvlinops": (curvlinops_build_first, curvlinops_next, curvlinops_next),
    }, state


def peak_bytes(fn, device: str) -> int:
    """Peak of torch's live tensor bytes during ``fn()``, above the start."""
    from villani.measure.hvp_cost import PeakMemory

    with PeakMemory(torch.device(device)) as mem:
        fn()
    return mem.peak()


def timed_wall_cpu(fn, device: str) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of ``fn()``. On a shared CPU the CPU time
    is the steadier measure of the work (with one thread it is the wall time without the
    waits for a core); on a GPU only the wall time means anything."""
    sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    sync(device)
    return time.perf_counter() - wall, time.process_time() - cpu


def block_methods(model, x, V):
    """name -> callable applying the k rows of ``V`` with the graph not kept: ours one graph
    build for the block (``ModelHessian.matmat``, reuse_graph=False: what ``measure.probe_block``
    = k pays where the graph does not fit), curvlinops its batched product (``vmap``)."""
    ours, cl = ModelHessian(model, [x], reuse_graph=False), curvlinops_hessian(model, x)
    Vt = V.T.contiguous()
    return {"ours": lambda: ours.matmat(V), "curvlinops": lambda: cl @ Vt}


def run_regimes(args, model, x, V) -> None:
    """Medians of interleaved rounds of the three regimes (and, with ``--k`` > 1, of k
    products per graph build), ratios, peak memory."""
    v, k = V[0], args.k
    methods, state = regime_methods(model, x, v)
    blocks = block_methods(model, x, V[:k]) if k > 1 else {}
    names = list(methods)
    samples = {(n, r): [] for n in names for r in REGIMES}
    block_samples = {n: [] for n in blocks}
    for rnd in range(args.repeats + 1):  # round 0 is the warm-up
        for n in names[rnd % len(names):] + names[: rnd % len(names)]:
            build_first, nxt, rebuilt = methods[n]
            times = [timed_wall_cpu(build_first, args.device), timed_wall_cpu(nxt, args.device)]
            del state[n]  # the kept graph goes before the rebuilt product
            times.append(times[1] if n == "curvlinops" else timed_wall_cpu(rebuilt, args.device))
            for r, t in zip(REGIMES, times):
                if rnd:
                    samples[(n, r)].append(t)
            if n in blocks:
                t = timed_wall_cpu(blocks[n], args.device)
                if rnd:
                    block_samples[n].append((t[0] / k, t[1] / k))
    peaks = {}
    for n in names:
        build_first, _, rebuilt = methods[n]
        first = peak_bytes(build_first, args.device)
        state.pop(n)
        state["release"]()  # ours' rebuilt product allocates its output-layer buffer inside
        peaks[n] = (first, first if n == "curvlinops" else peak_bytes(rebuilt, args.device))
    for i, clock in enumerate(("wall", "CPU")):
        med = {key: statistics.median(t[i] for t in s) for key, s in samples.items()}
        print(f"{clock + ' seconds per product':28s}" + "".join(f"{r:>28s}" for r in REGIMES))
        for n in names:
            print(f"{n:28s}" + "".join(f"{med[(n, r)]:28.3f}" for r in REGIMES))
        for other in ("PyHessian", "curvlinops"):
            print(f"{'ratio ours/' + other:28s}"
                  + "".join(f"{med[('ours', r)] / med[(other, r)]:28.2f}" for r in REGIMES))
    if blocks:  # PyHessian has no block mode: each of its products rebuilds the graph
        print(f"graph not kept, k = {k} products per graph build (ours: ModelHessian.matmat, = measure.probe_block "
              f"{k}; curvlinops: its vmap block; PyHessian: one build per product), seconds per product (wall / CPU):")
        py = [statistics.median(t[i] for t in samples[("PyHessian", REGIMES[2])]) for i in (0, 1)]
        for n, s_ in block_samples.items():
            med = [statistics.median(t[i] for t in s_) for i in (0, 1)]
            print(f"  {n:26s} {med[0]:9.3f} / {med[1]:9.3f}   ratio to PyHessian's rebuilt product "
                  f"{med[0] / py[0]:.2f} / {med[1] / py[1]:.2f}")
    print("peak tensor memory above the start, GiB (build + first product / rebuilt product):")
    for n in names:
        print(f"  {n:26s} {peaks[n][0] / 2**30:8.3f} / {peaks[n][1] / 2**30:8.3f}")
    print("raw (wall, CPU) seconds per round:",
          {f"{n}|{r}": [(round(w, 3), round(c, 3)) for w, c in samples[(n, r)]] for n, r in samples})


def profile_products(args, model, x, v) -> None:
    """``--mode profile`` (module docstring): for each regime of :func:`regime_methods`,
    ``args.repeats`` products of ours and of PyHessian under the profiler, after a warm-up."""
    from torch.profiler import ProfilerActivity, profile

    methods, state = regime_methods(model, x, v)
    cuda = args.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    n = args.repeats
    for r, regime in enumerate(REGIMES):
        tables = {}
        print(f"-- {regime}")
        for name in ("ours", "PyHessian"):
            build_first = methods[name][0]
            fn = methods[name][r]
            build_first()  # warm-up; "next" continues this operator
            sync(args.device)
            with profile(activities=activities) as prof:
                wall = sum(timed(fn, args.device) for _ in range(n)) / n
            events = prof.key_averages()
            kernels = [e for e in prof.events() if cuda and e.device_type.name == "CUDA"]
            ops = sum(e.count for e in events if e.key.startswith("aten::")) / n
            print(f"{name:10s} {wall * 1e3:9.2f} ms wall per product; {ops:7.0f} aten ops"
                  + (f"; {len(kernels) / n:6.0f} kernels, {sum(e.device_time for e in kernels) / 1e3 / n:8.2f} ms "
                     "of kernel time" if cuda else ""))
            tables[name] = {e.key: (getattr(e, key) / 1e3 / n, e.count / n) for e in events}
            state.pop(name, None)
        print(f"operators by |ours − PyHessian| self {'device' if cuda else 'CPU'} ms per product "
              "(ms ours, ms PyHessian, calls ours, calls PyHessian):")
        keys = set(tables["ours"]) | set(tables["PyHessian"])
        diff = {k: tables["ours"].get(k, (0, 0))[0] - tables["PyHessian"].get(k, (0, 0))[0] for k in keys}
        for k in sorted(keys, key=lambda k: -abs(diff[k]))[:12]:
            (a, ca), (b, cb) = tables["ours"].get(k, (0, 0)), tables["PyHessian"].get(k, (0, 0))
            print(f"  {k[:60]:60s} {a:9.2f} {b:9.2f} {ca:7.0f} {cb:7.0f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--k", type=int, default=4, help="probes per batched call (0/1: no batched variants)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--mode", choices=("products", "regimes", "profile"), default="products")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")

    model = build_model(args)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(args.seed))
    x = x.to(args.device)
    dim = sum(p.numel() for p in model.parameters())
    V = rademacher_rows(max(args.k, 1), dim, seed=args.seed, dtype=torch.float32, device=args.device)

    print(f"GPT-Neo d={dim:,} ({args.layers} layers, hidden {args.hidden}, vocab {args.vocab}); "
          f"batch {args.batch}×{args.seq} tokens; device {args.device}; threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; medians of {args.repeats} interleaved rounds", flush=True)
    if args.mode == "regimes":
        run_regimes(args, model, x, V)
        return
    if args.mode == "profile":
        profile_products(args, model, x, V[0])
        return
    methods, setup, _ = make_methods(args, model, x, V)
    names = list(methods)
    for fn, _ in methods.values():  # warm-up
        fn()
    samples = {n: [] for n in names}
    for r in range(args.repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            fn, per = methods[n]
            samples[n].append(timed(fn, args.device) / per)
    med = {n: statistics.median(s) for n, s in samples.items()}
    g = med["gradient"]

    print(f"{'method':48s} {'s/probe':>10s} {'× gradient':>11s}")
    for n in names:
        print(f"{n:48s} {med[n]:10.4f} {med[n] / g:11.2f}")
    ours = med["ours (double backward, fused CE, graph reuse)"]
    print(f"ratio ours/PyHessian  = {ours / med['PyHessian']:.2f}")
    print(f"ratio ours/curvlinops = {ours / med['curvlinops']:.2f}")
    best_ours = min(v for n, v in med.items() if n.startswith("ours"))
    print(f"best ours/PyHessian   = {best_ours / med['PyHessian']:.2f}")
    print(f"one-time setup (graph build, median of 3): ours {setup['ours']:.3f} s, "
          f"PyHessian {setup['pyhessian']:.3f} s (includes a model deepcopy)")
    if args.device.startswith("cuda"):
        print(f"peak CUDA memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
