"""``villani cost``: seconds and peak memory of one Hessian-vector product vs model size (Fig 10).

For every hidden size h in ``figures.model_sizes`` a model of ``model.config``'s family
is built with hidden size h, MLP width 4h and the largest head count ≤ the configured one
dividing h (:func:`sized_config`) (layers, vocabulary — from the data stats — and
``data.seq_len`` unchanged), on one batch of ``measure.batch_size`` random token blocks.
With :class:`villani.curvature.ModelHessian` (``measure.hvp_method``, λ = 1: the
regulariser adds one axpy, the same for any λ > 0) it times, each the median of
``figures.cost_repeats`` runs after one warm-up:

- ``seconds_hvp``: one product with the gradient graph kept between products — what each
  further Hutchinson probe or Lanczos step of a measurement costs;
- ``seconds_hvp_fresh``: one product from scratch (forward, gradient graph, double
  backward) — the cost of an isolated HVP;
- ``seconds_grad``: one forward + backward for the gradient ∇L.

``peak_memory_bytes`` is the peak of live tensor memory in a separate, untimed pass that
builds the model and runs one product from scratch and one with the graph kept, counted
above what was live when the pass began — on every device the same quantity:
``torch.cuda.max_memory_allocated`` − ``memory_allocated`` at the start on CUDA; on CPU the
running sum of torch's own allocation and free events (``torch.profiler`` with
``profile_memory=True``), whose maximum is the peak. Torch's accounting, not the process's
resident set: RSS counts allocator caches and background frees of other libraries and
cannot be reset reliably. The column ``memory_source`` says which. One untimed pass at the
smallest size runs first. Writes ``results/cost/{dataset}/hvp_cost.csv``.
"""

from __future__ import annotations

import copy
import gc
import math
import statistics
import time
from typing import Callable, Mapping

import pandas as pd
import torch

from villani.plan.families import config_key
from villani.io import tables
from villani.io.results import data_stats
from villani.model.causal_lm import pick_device
from villani.plan import layout


def sized_config(model_cfg: Mapping, hidden_size: int) -> dict:
    """``model.config`` with the width set to ``hidden_size`` (MLP 4h, heads dividing h,
    key/value heads dividing the heads), under the key names the config uses, else its
    family's (:func:`villani.plan.families.config_key`)."""
    cfg = copy.deepcopy(dict(model_cfg["config"]))
    h = int(hidden_size)
    heads_key = config_key(cfg, "heads")
    heads = max(k for k in range(1, int(cfg.get(heads_key, 1)) + 1) if h % k == 0)
    cfg.update({config_key(cfg, "hidden"): h, config_key(cfg, "mlp"): 4 * h, heads_key: heads})
    if "num_key_value_heads" in cfg:
        cfg["num_key_value_heads"] = max(k for k in range(1, min(int(cfg["num_key_value_heads"]), heads) + 1)
                                         if heads % k == 0)
    return {**{k: v for k, v in model_cfg.items() if k != "config"}, "config": cfg, "init": "scratch", "name": None}


class PeakMemory:
    """Peak of live tensor bytes allocated inside a ``with`` block, above its start.

    CUDA: the allocator's own peak counter, reset on entry. CPU: every allocation and free
    torch makes is recorded by the profiler (``profile_memory=True``); ``peak()`` (after the
    block) is max over time of the running sum of those events. Frees of tensors allocated
    before the block are not recorded (torch warns of each), so they count neither way.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = "cuda" if device.type == "cuda" else "cpu"
        self.source = ("torch.cuda.max_memory_allocated" if self.kind == "cuda"
                       else "torch allocation events (torch.profiler)")
        self._base = 0
        self._prof = None
        self._peak: int | None = None

    def __enter__(self) -> "PeakMemory":
        gc.collect()
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = int(torch.cuda.memory_allocated(self.device))
        else:
            from torch.profiler import ProfilerActivity, profile

            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
            self._peak = max(0, int(torch.cuda.max_memory_allocated(self.device)) - self._base)
        else:
            self._prof.__exit__(*exc)
            if exc[0] is None:
                self._peak = cpu_peak_from_events(self._prof)
        return None

    def peak(self) -> int:
        """Peak bytes above the start; available once the ``with`` block has ended."""
        if self._peak is None:
            raise RuntimeError("PeakMemory.peak() is known only after the with-block has ended")
        return self._peak


def cpu_peak_from_events(prof) -> int:
    """max(0, max_t Σ_{events e ≤ t} nbytes(e)) over the profiler's CPU ``[memory]`` events."""
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError as err:  # a torch whose profiler keeps its results elsewhere
        raise RuntimeError(f"torch {torch.__version__}: the profiler exposes no memory events "
                           "(prof.profiler.kineto_results); CPU peak memory cannot be measured") from err
    mem = sorted(((e.start_ns(), int(e.nbytes())) for e in events
                  if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU),
                 key=lambda t: t[0])
    live = peak = 0
    for _, nbytes in mem:
        live += nbytes
        peak = max(peak, live)
    return peak


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
    from villani.model.causal_lm import build_model, describe_model, num_params

    model_cfg = sized_config(params.model, hidden_size)
    seq_len = params.data.seq_len
    batch_size = params.measure.batch_size
    lam = 1.0  # ∇²F·v = ∇²L·v + λv: any λ > 0 costs the same (one added axpy)
    gen = torch.Generator().manual_seed(int(hidden_size))
    batch = torch.randint(0, vocab_size, (batch_size, seq_len), generator=gen)
    method = params.measure.hvp_method

    def setup():
        model = build_model(model_cfg, vocab_size, seq_len, seed=0).to(device)
        H = ModelHessian(model, [batch], lam=lam, method=method)
        v = torch.randn(H.dim, generator=torch.Generator().manual_seed(1), dtype=H.dtype).to(device)
        return model, H, v

    model, H, v = setup()
    d = num_params(model)
    arch = describe_model(model)
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
    del H, model, v, x, params_list, grad_once, fresh_hvp
    gc.collect()
    with PeakMemory(device) as mem:  # untimed: the profiler's bookkeeping would skew seconds
        model, H, v = setup()
        H.matvec(v)  # from scratch: forward, gradient graph, double backward
        H.matvec(v)  # with the graph kept
        del H, model, v
    peak = mem.peak()
    gc.collect()
    return {
        "hidden_size": int(hidden_size), "num_layers": int(arch["num_hidden_layers"]),
        "num_heads": int(arch["num_attention_heads"]), "intermediate_size": int(4 * hidden_size), "d": int(d),
        "tokens": batch_size * seq_len, "seconds_hvp": seconds_hvp, "seconds_hvp_fresh": seconds_fresh,
        "seconds_grad": seconds_grad, "peak_memory_bytes": int(peak), "memory_source": mem.source,
        "device": device.type, "method": params.measure.hvp_method, "repeats": int(repeats),
        "torch": torch.__version__,
    }


def run_hvp_cost(params: Mapping, root=layout.RESULTS, device: str | None = None) -> str:
    """Run the sweep over ``figures.model_sizes`` (smallest first); write the CSV; return its path."""
    dev = pick_device(device)
    sizes = sorted(set(params.figures.model_sizes))
    if not sizes:
        raise ValueError("figures.model_sizes is empty: nothing to sweep")
    vocab = int(data_stats(params, root)["vocab_size"])
    repeats = params.figures.cost_repeats
    # one untimed pass first: lazy imports, the autograd engine and the allocator's first
    # arenas would otherwise be charged to the smallest size's time and memory
    measure_size(params, sizes[0], vocab, dev, 1)
    rows = [measure_size(params, h, vocab, dev, repeats) for h in sizes]
    if any(not math.isfinite(r["seconds_hvp"]) for r in rows):
        raise ValueError("HVP timing is not finite")
    path = layout.fmt(layout.COST_CSV, root, dataset=params.data.name)
    tables.write("hvp_cost", path, pd.DataFrame(rows))
    return str(path)
