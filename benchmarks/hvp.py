"""Hessian-vector product cost: villani.curvature vs PyHessian vs curvlinops.

Same GPT-Neo (eager attention, fp32, eval), same token batch, same probe vectors. Each
method's per-probe time is the median over ``--repeats`` rounds; rounds interleave the
methods (rotating order) so load drift on a shared machine hits all of them alike.
Times are reported as multiples of one gradient (forward + backward of the same mean
token cross-entropy) measured in the same rounds, plus ours/theirs ratios.

    python benchmarks/hvp.py                       # CPU, tiny GPT-Neo (d ≈ 1.02M), 8×128 tokens
    python benchmarks/hvp.py --threads 1
    python benchmarks/hvp.py --device cuda --k 8   # on a GPU: batched products too

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


def add_model_args(ap: argparse.ArgumentParser) -> None:
    """The GPT-Neo and batch options shared with ``measure.py``."""
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
    return gpt_neo(vocab=args.vocab, hidden=args.hidden, layers=args.layers, heads=args.heads,
                   positions=max(args.seq, 128), window=max(1, args.seq // 2), seed=args.seed).to(args.device)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def make_methods(args, model, x, V):
    """name -> (callable doing one block of products, probes per call)."""
    from curvlinops import HessianLinearOperator
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

    cl = HessianLinearOperator(
        ShiftedLogits(model), torch.nn.CrossEntropyLoss(), params, [(x, target)], check_deterministic=False
    )
    methods["curvlinops"] = (lambda: cl @ V[0], 1)
    if k > 1:
        Vt = V[:k].T.contiguous()
        methods[f"curvlinops k={k}"] = (lambda: cl @ Vt, k)
    return methods, setup, ours


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(ap)
    ap.add_argument("--k", type=int, default=4, help="probes per batched call (0/1: no batched variants)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision("highest")

    model = build_model(args)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(args.seed))
    x = x.to(args.device)
    dim = sum(p.numel() for p in model.parameters())
    V = rademacher_rows(max(args.k, 1), dim, seed=args.seed, dtype=torch.float32, device=args.device)

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

    print(f"GPT-Neo d={dim:,} ({args.layers} layers, hidden {args.hidden}, vocab {args.vocab}); "
          f"batch {args.batch}×{args.seq} tokens; device {args.device}; threads {torch.get_num_threads()}; "
          f"torch {torch.__version__}; medians of {args.repeats} interleaved rounds")
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
