"""``villani cost``: seconds and peak memory of one Hessian-vector product vs model size (Fig 10).

For every hidden size h in ``figures.model_sizes`` a GPT-Neo is built from
``model.config`` with ``hidden_size = h``, ``intermediate_size = 4h`` and the largest head
count ≤ ``num_heads`` dividing h (layers, vocabulary — from the data stats — and
``data.seq_len`` unchanged), on one batch of ``measure.batch_size`` random token blocks.
With :class:`villani.curvature.ModelHessian` (``measure.hvp_method``) it times, each the
median of ``figures.cost_repeats`` runs after one warm-up:

- ``seconds_hvp``: one product with the gradient graph kept between products — what each
  further Hutchinson probe or Lanczos step of a measurement costs;
- ``seconds_hvp_fresh``: one product from scratch (forward, gradient graph, double
  backward) — the cost of an isolated HVP;
- ``seconds_grad``: one forward + backward for the gradient ∇L.

``peak_memory_bytes`` is the peak while building the model and running those products:
``torch.cuda.max_memory_allocated`` on CUDA; on CPU the rise of the process's peak
resident set (Linux ``VmHWM`` after resetting it through ``/proc/self/clear_refs``) over
the resident set before the model was built, or of ``ru_maxrss`` where ``/proc`` is not
available (a high-water mark that never resets: sizes run smallest first). The column
``memory_source`` says which. One untimed pass at the smallest size runs first. Writes ``results/cost/hvp_cost.csv``.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import math
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd
import torch

from villani import atomic, layout
from villani.readers import data_stats


def sized_config(model_cfg: Mapping, hidden_size: int) -> dict:
    """``model.config`` with the width set to ``hidden_size`` (MLP 4h, heads dividing h)."""
    cfg = copy.deepcopy(dict(model_cfg["config"]))
    h = int(hidden_size)
    heads = max(k for k in range(1, int(cfg.get("num_heads", 1)) + 1) if h % k == 0)
    cfg.update(hidden_size=h, intermediate_size=4 * h, num_heads=heads)
    return {**{k: v for k, v in model_cfg.items() if k != "config"}, "config": cfg, "init": "scratch", "name": None}


def cost_digest(params: Mapping) -> str:
    """sha256 (16 hex) of the keys the cost sweep reads (a Snakemake rule param)."""
    keys = {"model": params["model"], "seq_len": params["data"]["seq_len"],
            "measure": {k: params["measure"][k] for k in ("batch_size", "hvp_method")},
            "figures": {k: params["figures"].get(k) for k in ("model_sizes", "cost_repeats")}}
    return hashlib.sha256(json.dumps(keys, sort_keys=True, default=str).encode()).hexdigest()[:16]


class PeakMemory:
    """Peak memory of a code region on CUDA or CPU (see the module docstring)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = ""  # "cuda", "vmhwm" or "maxrss"
        self.source = ""
        self.base = 0

    def __enter__(self) -> "PeakMemory":
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = 0
            self.kind, self.source = "cuda", "torch.cuda.max_memory_allocated"
        elif _proc_status() is not None and _reset_hwm():
            self.base = _proc_status()["VmRSS"]
            self.kind, self.source = "vmhwm", "CPU peak-RSS rise (VmHWM)"
        else:
            self.base = _maxrss_bytes()
            self.kind, self.source = "maxrss", "CPU ru_maxrss rise (never reset)"
        return self

    def peak(self) -> int:
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device))
        status = _proc_status()
        if status is not None and self.kind == "vmhwm":
            return max(0, status["VmHWM"] - self.base)
        return max(0, _maxrss_bytes() - self.base)

    def __exit__(self, *exc) -> None:
        return None


def _proc_status() -> dict[str, int] | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    out = {}
    for key in ("VmRSS", "VmHWM"):
        m = re.search(rf"^{key}:\s+(\d+)\s+kB", text, re.M)
        if m is None:
            return None
        out[key] = int(m.group(1)) * 1024
    return out


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) if sys.platform == "darwin" else int(r) * 1024


def _median_seconds(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fn()  # warm-up (allocations, kernels, graph)
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def measure_size(params: Mapping, hidden_size: int, vocab_size: int, device: torch.device, repeats: int) -> dict:
    """One row of the sweep: d, seconds per product, peak memory, for one hidden size."""
    from villani.curvature import ModelHessian, causal_lm_token_loss
    from villani.model import build_model, num_params

    model_cfg = sized_config(params["model"], hidden_size)
    seq_len = int(params["data"]["seq_len"])
    batch_size = int(params["measure"]["batch_size"])
    lam = max(float(x) for x in params["train"]["lambdas"])
    gen = torch.Generator().manual_seed(int(hidden_size))
    batch = torch.randint(0, vocab_size, (batch_size, seq_len), generator=gen)
    with PeakMemory(device) as mem:
        model = build_model(model_cfg, vocab_size, seq_len, seed=0).to(device)
        d = num_params(model)
        H = ModelHessian(model, [batch], lam=lam, method=params["measure"]["hvp_method"])
        v = torch.randn(H.dim, generator=torch.Generator().manual_seed(1), dtype=H.dtype).to(device)
        x = batch.to(device)
        params_list = [p for p in model.parameters() if p.requires_grad]

        def grad_once():
            loss = causal_lm_token_loss(model(input_ids=x, use_cache=False).logits, x)
            return torch.autograd.grad(loss, params_list)

        def fresh_hvp():
            H.release()
            return H.matvec(v)

        seconds_grad = _median_seconds(grad_once, repeats, device)
        seconds_fresh = _median_seconds(fresh_hvp, repeats, device)
        seconds_hvp = _median_seconds(lambda: H.matvec(v), repeats, device)
        peak = mem.peak()
    del H, model, v, x, params_list
    gc.collect()
    cfg = model_cfg["config"]
    return {
        "hidden_size": int(hidden_size), "num_layers": int(cfg.get("num_layers", 0)),
        "num_heads": int(cfg["num_heads"]), "intermediate_size": int(cfg["intermediate_size"]), "d": int(d),
        "tokens": batch_size * seq_len, "seconds_hvp": seconds_hvp, "seconds_hvp_fresh": seconds_fresh,
        "seconds_grad": seconds_grad, "peak_memory_bytes": int(peak), "memory_source": mem.source,
        "device": device.type, "method": params["measure"]["hvp_method"], "repeats": int(repeats),
        "torch": torch.__version__,
    }


def run_hvp_cost(params: Mapping, root=layout.RESULTS, device: str | None = None) -> str:
    """Run the sweep over ``figures.model_sizes`` (smallest first); write the CSV; return its path."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    sizes = sorted({int(h) for h in params["figures"]["model_sizes"]})
    if not sizes:
        raise ValueError("figures.model_sizes is empty: nothing to sweep")
    vocab = int(data_stats(params, root)["vocab_size"])
    repeats = int(params["figures"].get("cost_repeats", 3))
    # one untimed pass first: lazy imports, the autograd engine and the allocator's first
    # arenas would otherwise be charged to the smallest size's time and memory
    measure_size(params, sizes[0], vocab, dev, 1)
    rows = [measure_size(params, h, vocab, dev, repeats) for h in sizes]
    if any(not math.isfinite(r["seconds_hvp"]) for r in rows):
        raise ValueError("HVP timing is not finite")
    path = layout.fmt(layout.COST_CSV, root)
    atomic.write_text(path, pd.DataFrame(rows).to_csv(index=False))
    return str(path)
