"""Sharded Hessian-vector products: per-rank memory and time, and the finite-difference error.

Part 1 — memory and time per rank, one process vs 2 gloo processes on CPU, at a few GPT-Neo
sizes (eager attention, fp32, eval; 2 batches of ``--batch``×``--seq`` tokens, one per rank):

- ``exact``: :class:`ModelHessian` (double backward, fused output layer, graph reuse), one process;
- ``fd``: :class:`FiniteDifferenceHessian` on the plain model, one process;
- ``exact-dp``: :class:`DataParallelHessian` (model replicated, vectors sharded), 2 ranks;
- ``fd-fsdp2``: :class:`FiniteDifferenceHessian` on an FSDP2 ``fully_shard`` model, 2 ranks.

Per rank: parameters held at rest (bytes of the local parameter tensors), and the peak of
live tensor bytes *above* that while the operator is built and applies two products (torch's
own allocation events, ``villani.measure.hvp_cost.PeakMemory``), and seconds per product (median of
``--repeats``; for ``exact`` the graph-reusing products after the first). Every process
runs one thread, so 2 ranks use 2 cores where the single process uses 1.

Part 2 — relative error ‖Hv_fd − Hv‖/‖Hv‖ of the central difference against the exact float64
product at the same θ, for Rademacher directions and for the top-3 eigenvectors, over the
step h (ε = h·rms(θ)/‖v‖_∞), in fp32 and bf16, on three GPT-Neo points: at initialisation,
after ``--train-steps`` AdamW steps on a random bigram source, and the test suite's tiny model
with large weights. Plus FSDP2 mixed precision (fp32 shards, bf16 compute) on 2 ranks at
the bf16 default step.

    python benchmarks/sharded.py                  # ~5 min on 2 cores
    python benchmarks/sharded.py --sizes 64 128   # fewer sizes
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.curvature.cases import gpt_neo, tiny_gpt_neo, token_batches  # noqa: E402

from villani.measure.hvp_cost import PeakMemory  # noqa: E402
from villani.curvature import ModelHessian, top_eigenvalues  # noqa: E402
from villani.curvature.operators.data_parallel_hessian import DataParallelHessian  # noqa: E402
from villani.curvature.operators.finite_difference_hessian import FiniteDifferenceHessian, default_rel_step  # noqa: E402
from villani.curvature.operators.vectors import operator_vectors  # noqa: E402
from villani.curvature.probes import rademacher_rows  # noqa: E402

CPU = torch.device("cpu")


def bench_model(args, hidden: int):
    return gpt_neo(vocab=args.vocab, hidden=hidden, layers=args.layers, heads=4, positions=args.seq,
                   window=max(1, args.seq // 2), seed=0)


def bench_batches(args):
    return token_batches(vocab=args.vocab, seed=1, shapes=((args.batch, args.seq),) * 2)


def local_param_bytes(model) -> int:
    from torch.distributed.tensor import DTensor

    return sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in model.parameters())


def measure(build, repeats: int) -> dict:
    """Build the operator inside PeakMemory, apply two products; then time ``repeats`` more
    (for ``exact``, products that reuse the gradient graph built by the first)."""
    with PeakMemory(CPU) as mem:
        op = build()
        vectors = operator_vectors(op)
        v = vectors.probes(0, dtype=op.dtype, device=op.device).next(1)[0]
        op.matvec(v)
        op.matvec(v)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        op.matvec(v)
        times.append(time.perf_counter() - t0)
    return {"peak_bytes": mem.peak(), "seconds": statistics.median(times), "local_dim": vectors.local_dim,
            "dim": op.dim}


# ----------------------------------------------------------------------------- part 1
def single_rows(args) -> list[dict]:
    rows = []
    for hidden in args.sizes:
        batches = bench_batches(args)
        for mode in ("exact", "fd"):
            model = bench_model(args, hidden)
            params = local_param_bytes(model)
            if mode == "exact":
                r = measure(partial(ModelHessian, model, batches), args.repeats)
            else:
                r = measure(partial(FiniteDifferenceHessian, model, batches), args.repeats)
            rows.append({"mode": mode, "ranks": 1, "hidden": hidden, "param_bytes": params, **r})
            print(f"  {mode:9s} ranks=1 hidden={hidden} d={r['dim']:,} {r['seconds']:.3f} s/product", flush=True)
    return rows


def _rank_worker(rank: int, world: int, init_file: str, out_dir: str, args) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    rows = []
    try:
        for hidden in args.sizes:
            batches = bench_batches(args)
            model = bench_model(args, hidden)
            r = measure(partial(DataParallelHessian, model, batches), args.repeats)
            rows.append({"mode": "exact-dp", "ranks": world, "hidden": hidden, "rank": rank,
                         "param_bytes": local_param_bytes(model), **r})
            del model
            model = bench_model(args, hidden)
            for block in model.transformer.h:
                fully_shard(block)
            fully_shard(model)
            r = measure(partial(FiniteDifferenceHessian, model, batches), args.repeats)
            rows.append({"mode": "fd-fsdp2", "ranks": world, "hidden": hidden, "rank": rank,
                         "param_bytes": local_param_bytes(model), **r})
            del model
        # FSDP2 mixed precision: fp32 shards, bf16 compute; error vs exact fp64 at the fp32 θ
        errors = {}
        for name, build in fd_points(args).items():
            model = build()
            exact_model = copy.deepcopy(model).double()
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for block in model.transformer.h:
                fully_shard(block, mp_policy=policy)
            fully_shard(model, mp_policy=policy)
            batches = point_batches(name, args)
            fd = FiniteDifferenceHessian(model, batches, compute_dtype=torch.bfloat16)
            H = ModelHessian(exact_model, batches)
            V = rademacher_rows(3, H.dim, 0)
            exact = fd.vectors.shard(H.matmat(V))
            approx = fd.matmat(fd.vectors.shard(V).float()).double()
            num = fd.vectors.sum(((approx - exact) ** 2).sum()).sqrt()
            den = fd.vectors.sum((exact**2).sum()).sqrt()
            errors[name] = float(num / den)
        rows.append({"mode": "fd-fsdp2-mixed-bf16", "rank": rank, "errors": errors, "rel_step": fd.rel_step})
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(rows))


def sharded_rows(args) -> list[dict]:
    out = tempfile.mkdtemp()
    mp.start_processes(_rank_worker, args=(2, os.path.join(out, "pg"), out, args), nprocs=2, start_method="spawn")
    return [row for r in range(2) for row in json.loads(Path(out, f"rank{r}.json").read_text())]


# ----------------------------------------------------------------------------- part 2
def train_gpt_neo(steps: int, path: Path) -> float:
    """Train a GPT-Neo (hidden 64, vocab 256) for ``steps`` AdamW steps on sequences from a
    fixed random bigram source (each token has 4 likely successors); save its weights to
    ``path``; return the last training loss."""
    model = small_gpt_neo()
    gen = torch.Generator().manual_seed(7)
    succ = torch.randint(0, 256, (256, 4), generator=gen)

    def sample(b):
        x = torch.empty(b, 64, dtype=torch.long)
        x[:, 0] = torch.randint(0, 256, (b,), generator=gen)
        for t in range(1, 64):
            x[:, t] = succ[x[:, t - 1], torch.randint(0, 4, (b,), generator=gen)]
        return x

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        x = sample(16)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), path)
    return float(loss.detach())


def small_gpt_neo():
    return gpt_neo(vocab=256, hidden=64, layers=2, heads=4, positions=64, dtype=torch.float32)


def trained_gpt_neo(args):
    model = small_gpt_neo()
    model.load_state_dict(torch.load(args.trained_path))
    return model.eval()


def fd_points(args) -> dict:
    return {
        "init": small_gpt_neo,
        "trained": lambda: trained_gpt_neo(args),
        "tiny-large-weights": lambda: tiny_gpt_neo(dtype=torch.float32),
    }


def point_batches(name: str, args):
    if name == "tiny-large-weights":
        return token_batches()
    return token_batches(vocab=256, seed=3, shapes=((4, 64),))


def fd_error_rows(args) -> list[dict]:
    rows = []
    for name, build in fd_points(args).items():
        base = build()
        batches = point_batches(name, args)
        H = ModelHessian(copy.deepcopy(base).double(), batches)
        R = rademacher_rows(3, H.dim, 0)
        top = top_eigenvalues(H, 3, num_steps=40, seed=0, return_vectors=True)
        directions = {"rademacher": R, "top-3 eigenvectors": top.vectors}
        exact = {k: H.matmat(V) for k, V in directions.items()}
        for dtype in (torch.float32, torch.bfloat16):
            model = copy.deepcopy(base).to(dtype)
            # the exact product at the rounded θ
            ref = ModelHessian(copy.deepcopy(model).double(), batches) if dtype != torch.float32 else H
            exact_d = exact if dtype == torch.float32 else {k: ref.matmat(V) for k, V in directions.items()}
            for h in args.steps + [default_rel_step(dtype)]:
                fd = FiniteDifferenceHessian(model, batches, rel_step=h)
                for kind, V in directions.items():
                    approx = fd.matmat(V.to(fd.dtype)).double()
                    err = float(torch.linalg.vector_norm(approx - exact_d[kind]) / torch.linalg.vector_norm(exact_d[kind]))
                    rows.append({"point": name, "d": H.dim, "dtype": str(dtype).replace("torch.", ""), "h": h,
                                 "default": h == default_rel_step(dtype), "direction": kind, "rel_error": err})
        print(f"  fd errors: {name} (d={H.dim:,}) done", flush=True)
    return rows


# ----------------------------------------------------------------------------- report
def report(single: list[dict], sharded: list[dict], errors: list[dict]) -> None:
    mb = 1 / 2**20
    print("\n## Per-rank memory and time (CPU, 1 thread per process)\n")
    print("| mode | ranks | hidden | d | local entries | params/rank MB | peak above params MB (max over ranks) "
          "| peak / (4 d/R) | s/product | ×single exact |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = {r["hidden"]: r["seconds"] for r in single if r["mode"] == "exact"}
    merged = list(single)
    for mode in ("exact-dp", "fd-fsdp2"):
        for hidden in sorted({r["hidden"] for r in sharded if r.get("mode") == mode}):
            rs = [r for r in sharded if r.get("mode") == mode and r["hidden"] == hidden]
            merged.append({**rs[0], "peak_bytes": max(r["peak_bytes"] for r in rs),
                           "param_bytes": max(r["param_bytes"] for r in rs),
                           "local_dim": max(r["local_dim"] for r in rs),
                           "seconds": max(r["seconds"] for r in rs)})
    for r in sorted(merged, key=lambda r: (r["hidden"], r["ranks"], r["mode"])):
        per_param = r["peak_bytes"] / (4 * r["dim"] / r["ranks"])
        print(f"| {r['mode']} | {r['ranks']} | {r['hidden']} | {r['dim']:,} | {r['local_dim']:,} | "
              f"{r['param_bytes'] * mb:.1f} | {r['peak_bytes'] * mb:.1f} | {per_param:.1f} | {r['seconds']:.3f} | "
              f"{r['seconds'] / base[r['hidden']]:.2f} |")
    mixed = [r for r in sharded if r.get("mode") == "fd-fsdp2-mixed-bf16"]
    print("\n## Finite-difference relative error vs the exact float64 product\n")
    points = list(dict.fromkeys(r["point"] for r in errors))
    for point in points:
        rs = [r for r in errors if r["point"] == point]
        print(f"\n{point} (d = {rs[0]['d']:,})\n")
        hs = sorted({r["h"] for r in rs})
        print("| dtype | direction | " + " | ".join(f"h={h:.1e}" + ("*" if any(r["default"] and r["h"] == h for r in rs) else "")
                                                    for h in hs) + " |")
        print("|---|---|" + "---|" * len(hs))
        for dtype in ("float32", "bfloat16"):
            for kind in ("rademacher", "top-3 eigenvectors"):
                cells = []
                for h in hs:
                    hit = [r for r in rs if r["dtype"] == dtype and r["direction"] == kind and r["h"] == h]
                    cells.append(f"{hit[0]['rel_error']:.1e}" if hit else "")
                print(f"| {dtype} | {kind} | " + " | ".join(cells) + " |")
    if mixed:
        print(f"\n(* = default step.) FSDP2 mixed precision (fp32 shards, bf16 compute, 2 ranks), Rademacher, "
              f"h = {mixed[0]['rel_step']:.1e}: " + ", ".join(f"{k} {v:.1e}" for k, v in mixed[0]["errors"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256], help="hidden sizes of part 1")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=float, nargs="+", default=[1e-5, 1e-4, 1e-3, 1e-2, 1e-1], help="h values of part 2")
    ap.add_argument("--train-steps", type=int, default=300)
    ap.add_argument("--json", type=Path, default=None, help="also write all rows here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp())
    args.trained_path = work / "trained.pt"
    t0 = time.perf_counter()
    loss = train_gpt_neo(args.train_steps, args.trained_path)
    print(f"trained the 'trained' point: {args.train_steps} steps, last loss {loss:.3f} "
          f"(uniform: {torch.log(torch.tensor(256.0)):.3f}, source entropy: {torch.log(torch.tensor(4.0)):.3f}), "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    print("part 1: one process", flush=True)
    single = single_rows(args)
    print("part 1: 2 ranks (gloo)", flush=True)
    sharded = sharded_rows(args)
    print("part 2: finite-difference errors", flush=True)
    errors = fd_error_rows(args)
    report(single, sharded, errors)
    if args.json:
        args.json.write_text(json.dumps({"single": single, "sharded": sharded, "fd_errors": errors}, indent=1))


if __name__ == "__main__":
    main()
