"""Seconds per training step, eager vs compiled (``train.compile``), and which kernels a bf16
step runs in float32.

``--mode timing`` (default): two runs of the same (variant, λ, seed) — one with the eager
step, one with the compiled step (:mod:`villani.training.step`; on CUDA captured as CUDA
graphs) — built as ``villani train`` builds them, on the parameters' corpus (tokenized into a
temporary folder). The compiled run's first steps are its compile (timed: the one-time cost
a segment pays per process); then ``--rounds`` rounds, each ``--steps`` steps of either run
in alternating order (load drift hits both alike), every step's row brought to the host as
the training loop does. Prints per thread count the median seconds per step, the ratio,
the compile seconds and the steps after which the compile has paid for itself.

``--mode autocast``: one training step of the eager run under bf16 autocast (on CUDA as
``train.precision: auto`` runs it; on the CPU CPU-autocast, whose op lists differ from
CUDA's), every aten operator recorded with the dtype of its floating inputs: the matrix
products (mm, addmm, bmm, baddbmm, linear, attention) by dtype, then every operator that ran
in float32 with its count — what a bf16 step leaves in float32 and whether it should.

    python benchmarks/train_step.py --threads 1 2                   # the default model, CPU
    python benchmarks/train_step.py --mode autocast --threads 1
    python benchmarks/train_step.py --device cuda --params configs/rehearsal.yaml --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from villani.plan.config import load_params  # noqa: E402


def _runs(params_files: list[str], root: Path, device: str, variant: str, lam: float) -> dict:
    """The eager and the compiled run (``_SegmentState``) of one (variant, λ, seed 0)."""
    from villani.plan import layout
    from villani.plan.config import dataset_names, dataset_params
    from villani.training.loop import _SegmentState

    doc = load_params(params_files)
    p = dataset_params(doc, dataset_names(doc)[0])
    data = layout.fmt(layout.DATA_DIR, root, dataset=p["data"]["name"])
    if not (data / "stats.json").exists():
        from villani.data import tokenize

        tokenize(p["data"], data)
    runs = {}
    for name, setting in (("eager", "off"), ("compiled", "on")):
        q = {**p, "train": {**p["train"], "compile": setting}}
        runs[name] = _SegmentState(q, root, p["data"]["name"], variant, lam, 0, torch.device(device), initial=True)
    return runs


def _steps(run, n: int) -> float:
    """Wall seconds of ``n`` steps, each row on the host after its step (the loop's work)."""
    from villani.training.step import PendingRows

    sync = torch.cuda.synchronize if run.device.type == "cuda" else (lambda: None)
    pending = PendingRows(run)
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        pending.add(run.train_step())
        if pending.due():
            list(pending.flush())
    list(pending.flush())
    sync()
    return time.perf_counter() - t0


def timing(args, root: Path) -> None:
    for threads in args.threads:
        torch.set_num_threads(threads)
        runs = _runs(args.params, root, args.device, args.variant, args.lam)
        compile_s = _steps(runs["compiled"], 2)  # the first call compiles, the second records the graphs
        _steps(runs["eager"], 2)
        per = {name: [] for name in runs}
        for r in range(args.rounds):
            for name in (("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")):
                per[name].append(_steps(runs[name], args.steps) / args.steps)
        med = {name: statistics.median(v) for name, v in per.items()}
        gain = med["eager"] - med["compiled"]
        x = runs["eager"].batch(0)
        print(f"{threads} thread(s), {args.device}, {x.shape[0]} × {x.shape[1]} tokens, {args.rounds} rounds of "
              f"{args.steps} steps: eager {med['eager'] * 1e3:.2f} ms/step, {runs['compiled'].stepper.mode} "
              f"{med['compiled'] * 1e3:.2f} ms/step (× {med['compiled'] / med['eager']:.2f}); compile + first 2 "
              f"steps {compile_s:.1f} s" + (f", paid back after {compile_s / gain:,.0f} steps" if gain > 0 else
                                              ", never paid back"))
        for name, v in per.items():
            print(f"  {name:9s} rounds (ms/step): " + " ".join(f"{s * 1e3:.2f}" for s in v))


FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
MATMULS = ("mm", "addmm", "bmm", "baddbmm", "linear", "matmul", "_scaled_dot_product", "_efficient_attention",
           "_flash_attention")


def autocast(args, root: Path) -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.set_num_threads(args.threads[0])
    run = _runs(args.params, root, args.device, args.variant, args.lam)["eager"]
    seen: Counter = Counter()

    class Census(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in
                             torch.utils._pytree.tree_leaves((a, kw or {}))
                             if isinstance(t, torch.Tensor) and t.dtype in FLOATS})
            seen[(func.overloadpacket.__name__, "/".join(dtypes) or "-")] += 1
            return func(*a, **(kw or {}))

    run.autocast = torch.autocast(run.device.type, dtype=torch.bfloat16)
    with Census():
        run.train_step()
    mm = Counter()
    for (op, dt), n in seen.items():
        if op.startswith(MATMULS):
            mm[dt] += n
    print(f"{args.device} autocast bf16, one {args.variant} step: matrix products by input dtype: "
          + ", ".join(f"{dt} {n}" for dt, n in mm.most_common()))
    fp32 = Counter({op: n for (op, dt), n in seen.items() if dt == "float32"})
    print("operators with float32 inputs: " + ", ".join(f"{op} {n}" for op, n in fp32.most_common()))
    mixed = Counter({f"{op} ({dt})": n for (op, dt), n in seen.items() if "/" in dt})
    print("operators with mixed inputs: " + (", ".join(f"{k} {n}" for k, n in mixed.most_common()) or "none"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("timing", "autocast"), default="timing")
    ap.add_argument("--params", action="extend", nargs="+", help="parameter files, in order (default: params.yaml)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--variant", default="adamw")
    ap.add_argument("--lam", type=float, default=0.012)
    ap.add_argument("--root", help="a results folder to tokenize into and reuse (default: a temporary one)")
    args = ap.parse_args()
    args.params = args.params or [str(REPO / "params.yaml")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.root or tmp)
        (timing if args.mode == "timing" else autocast)(args, root)


if __name__ == "__main__":
    main()
