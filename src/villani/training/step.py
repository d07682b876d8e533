"""One training step of a segment, eager or compiled (``train.compile``), and its per-step
log row, kept on the device until the loop needs it on the host.

The update is the one :mod:`villani.training.loop` states per variant: the loss L_B
(+ (λ/2)‖θ_dec‖² when coupled), its gradient, the noise ξ ~ N(0, grad_std²·I) added
(``adamw_noise``), the gradient clipped to ``train.grad_clip``, the optimizer's step, then
θ ← θ + √(2η_t/β)·Z (``adamw_noise``, ``langevin``) and the schedule's step. Two ways to run
it (:func:`step_mode`; ``train.compile``: ``auto`` | ``on`` | ``off``):

* **eager** (``off``; ``auto`` off CUDA): PyTorch op by op — the reference. CPU runs are
  bit-identical across kills, resumes and job splits.
* **compiled** / **captured** (``on``; ``auto`` on CUDA): three graphs under
  :func:`torch.compile` with static shapes — the forward (with the coupled L2 term), its
  backward (AOTAutograd), and the update: ξ added, clipping, the optimizer's own functional
  update (``torch.optim.adam.adam`` capturable — its step count and the learning rate as
  device tensors, the foreach lists fused by inductor — or ``torch.optim.sgd.sgd``), Z added,
  ‖θ‖². On CUDA ``mode="reduce-overhead"`` records each graph once as a CUDA graph and
  replays it every step (*captured*): a step is a few graph launches instead of thousands of
  kernel launches, which is what bounds GPT-Neo-125M at the paper's 1 × 512 tokens. On the
  CPU it is inductor's C++ kernels (*compiled*, no graphs). The learning rate enters as a
  device tensor filled each step, so the schedule never recompiles. ξ and Z are drawn outside
  the graphs from the run's generator (a device generator on CUDA), one ``randn`` per
  parameter tensor in the eager step's order: the same numbers. What differs from eager is
  rounding — fused kernels, float32 learning-rate arithmetic — so a compiled run equals the
  eager one within a tolerance (``tests/training/test_compiled_step.py``) and is
  bit-identical to itself across kills and resumes. With ``model.dropout`` > 0 its dropout
  masks come from inductor's generator (seeded from torch's, which the work state keeps):
  another draw than eager's. The optimizer's ``state_dict`` has one form in both modes (the
  param groups keep a float lr; Adam's step count is moved to the device on first use), so a
  segment may resume in the other mode; from there on it is a run of that mode, and each
  checkpoint records the mode it was trained in (``train_step``).

**``auto`` falls back.** ``auto`` picks the captured step on CUDA, where it may meet a
compiler or a driver that cannot build or capture its graphs. There a compiler failure (an
exception of ``torch._dynamo`` or ``torch._inductor``, at any step) or any failure of the
captured step while it compiles, warms up and records its graphs (its first
:data:`TRIAL_STEPS` steps in a process) does not stop the run: the step is undone — the
weights, the optimizer state and the random streams as they were before it, from a copy
kept over those first steps (a compiler failure comes before its graph runs, so later
steps need only the random streams) — one warning line names the reason, and the run goes
on in the eager step, from that step on, recorded in its checkpoints (``train_step``).
``on`` fails on the first such failure, in one line (:class:`CompileFailed`).

**No host sync per step.** A step's loss, gradient norm and ‖θ‖² stay on the device
(:class:`PendingRows`) until the loop needs them: every :data:`ROWS_PER_SYNC` steps or
:data:`SYNC_EVERY_S` seconds on CUDA, before every checkpoint, work state and stop, at the
segment's end — and every step on the CPU, where a value is on the host once computed. The
rows are the same as a step-by-step log's. A non-finite loss (``train.nonfinite: stop``)
stops the segment with the message of the step it happened at, after the rows before it
are logged; nothing is written after it (the updates from that step on are discarded with
the process). ``train.nonfinite: skip`` must know before the update, so it syncs every step.
On CUDA a step's seconds are the time between two CUDA events around it.
"""

from __future__ import annotations

import logging
import math
import re
import time
import warnings
from typing import Iterator, NamedTuple

import torch

from villani.curvature import regularised_loss
from villani.model.causal_lm import theta_sq_tensor
from villani.training.optim import decayed_sq_norm

__all__ = ["STEP_MODES", "ROWS_PER_SYNC", "SYNC_EVERY_S", "TRIAL_STEPS", "step_mode", "TrainStep", "PendingRows",
           "CompileFailed"]

log = logging.getLogger(__name__)

STEP_MODES = ("eager", "compiled", "captured")
ROWS_PER_SYNC = {"cuda": 32}  # steps a row may wait on the device; 1 on any other device
SYNC_EVERY_S = 1.0
TRIAL_STEPS = 3  # compiled steps of a process that compile, warm up and record their graphs (CUDA graph trees)


class CompileFailed(ValueError):
    """``torch.compile`` failed on the compiled step: one line naming the key and the way out;
    ``reason``: the compiler's exception, in one line."""

    def __init__(self, device: str, reason: str):
        super().__init__(f"train.compile: torch.compile failed on {device} ({reason}); set train.compile: off")
        self.reason = reason


def step_mode(setting: str, device: torch.device) -> str:
    """``eager``, ``compiled`` (inductor, no graphs) or ``captured`` (CUDA graphs) for
    ``train.compile`` = ``auto`` (captured on CUDA, eager elsewhere), ``on`` or ``off`` (YAML's
    bare on/off: true/false)."""
    setting = {True: "on", False: "off"}.get(setting, setting) if isinstance(setting, bool) else setting
    if setting not in ("auto", "on", "off"):
        raise ValueError(f"train.compile: {setting!r} is not one of auto, on, off")
    if setting == "off" or (setting == "auto" and device.type != "cuda"):
        return "eager"
    return "captured" if device.type == "cuda" else "compiled"


class Pending(NamedTuple):
    """A step's row before its device values reach the host."""

    step: int
    lr: float
    tokens: int  # this step's
    tokens_seen: int  # the run's, after it
    values: torch.Tensor  # float64 (loss, grad_norm, ‖θ‖²) on the device
    skipped: bool
    seconds: float | tuple  # host seconds, or a (start, end) pair of CUDA events


def _clock_start(device: torch.device):
    if device.type == "cuda":
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def _clock_stop(device: torch.device, start):
    if device.type == "cuda":
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        return start, end
    return time.perf_counter() - start


class TrainStep:
    """One step of ``run`` (:class:`villani.training.loop._SegmentState`) in ``mode``; a call
    returns its :class:`Pending` row and advances the run's step and token counters."""

    def __init__(self, run, mode: str, fallback: bool = False):
        if mode not in STEP_MODES:
            raise ValueError(f"step mode {mode!r} is not one of {', '.join(STEP_MODES)}")
        self.run, self.mode = run, mode
        self.graphs = _Graphs(self, captured=mode == "captured") if mode != "eager" else None
        self.fallback = fallback and self.graphs is not None  # train.compile: auto (module doc)
        self.tried = 0  # compiled steps taken in this process

    def with_l2(self, ce: torch.Tensor) -> torch.Tensor:
        """The loss whose gradient is taken: L_B, + (λ/2)‖θ_dec‖² in ``coupled`` mode."""
        run = self.run
        if run.t["decay_mode"] == "coupled" and run.lam > 0:
            return regularised_loss(ce, decayed_sq_norm(run.model, run.decayed), run.lam)
        return ce

    def skips(self, ce: torch.Tensor) -> bool:
        """``train.nonfinite: skip`` and a non-finite loss (a host sync; never with ``stop``)."""
        return self.run.t["nonfinite"] == "skip" and not math.isfinite(float(ce.detach()))

    def __call__(self) -> Pending:
        run = self.run
        x = run.batch(run.step)
        lr = run.opt.param_groups[0]["lr"]
        start = _clock_start(run.device)
        ce, grad_norm, theta = self._eager(x, lr) if self.graphs is None else self._compiled(x, lr)
        skipped = grad_norm is None
        if skipped:
            run.opt.zero_grad(set_to_none=True)
            grad_norm = torch.full((), math.nan, dtype=torch.float64, device=ce.device)
        if self.graphs is None:
            run.sched.step()
        else:
            with warnings.catch_warnings():  # the update runs torch.optim's functional form, not opt.step()
                warnings.filterwarnings("ignore", re.escape("Detected call of `lr_scheduler.step()` before"))
                run.sched.step()
        if theta is None:
            theta = theta_sq_tensor(run.model)
        values = torch.stack([ce.detach().double(), grad_norm.detach().double(), theta])
        seconds = _clock_stop(run.device, start)
        run.step += 1
        run.tokens += x.numel()
        return Pending(run.step, lr, x.numel(), run.tokens, values, skipped, seconds)

    def _compiled(self, x: torch.Tensor, lr: float):
        """The compiled step; with ``auto`` a failure undoes it and the run goes on eager (module doc)."""
        if not self.fallback:
            return self.graphs.step(x, lr)
        saved = _Undo(self.run, weights=self.tried < TRIAL_STEPS)
        self.tried += 1
        try:
            return self.graphs.step(x, lr)
        except Exception as e:
            if not (isinstance(e, CompileFailed) or (self.graphs.captured and saved.weights)):
                raise
            saved.restore()
            run = self.run
            why = e.reason if isinstance(e, CompileFailed) else _reason(e)
            log.warning(f"train.compile: auto: the {self.mode} step failed at step {run.step + 1} on {run.device.type} "
                        f"({why}); this run goes on in the eager step (train.compile: off skips the attempt)")
            self.graphs, self.mode = None, "eager"
            run.opt.load_state_dict(run.opt.state_dict())  # the optimizer state in the eager step's form
            return self._eager(x, lr)

    def _eager(self, x: torch.Tensor, lr: float):
        run = self.run
        run.model.train()
        ce = run.ce(x)
        loss = self.with_l2(ce)
        if self.skips(ce):
            return ce, None, None
        run.opt.zero_grad(set_to_none=True)
        loss.backward()
        if run.grad_std > 0:
            for p in run.model.parameters():
                if p.grad is not None:
                    p.grad.add_(torch.randn(p.shape, generator=run.noise_gen, device=p.device), alpha=run.grad_std)
        max_norm = run.t["grad_clip"] if run.t["grad_clip"] else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), max_norm)
        run.opt.step()
        if run.beta is not None:
            scale = math.sqrt(2.0 * lr / run.beta)
            with torch.no_grad():
                for p in run.model.parameters():
                    p.add_(torch.randn(p.shape, generator=run.noise_gen, device=p.device), alpha=scale)
        return ce, grad_norm, None


def _reason(e: BaseException) -> str:
    """``Type: first line`` of an exception (a first line that ends in ``:`` — inductor's
    ``backend='inductor' raised:`` — with the line after it)."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()] or [""]
    text = " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    return f"{type(e).__name__}: {text}"[:240]


def _compiler_failed(e: BaseException) -> bool:
    return type(e).__module__.startswith(("torch._dynamo", "torch._inductor"))


class _Graphs:
    """The compiled forward (and its backward) and update of a run (see the module docstring)."""

    def __init__(self, owner: TrainStep, captured: bool):
        run = owner.run
        self.owner, self.run, self.captured = owner, run, captured
        mode = "reduce-overhead" if captured else "default"
        self.forward = torch.compile(self._forward, mode=mode, dynamic=False)
        self.update = torch.compile(self._update, mode=mode, dynamic=False)
        self.lr = torch.zeros((), dtype=torch.float32, device=run.device)
        self.bf16 = bool(run.autocast._enabled)
        self.max_norm = float(run.t["grad_clip"]) if run.t["grad_clip"] else math.inf
        self.sgd = isinstance(run.opt, torch.optim.SGD)
        # each group's constant hyper-parameters, read once: inside a graph a param-group dict
        # would be guarded whole, its moving lr included (a recompile per step)
        self.hyper = tuple((g["weight_decay"], g.get("eps"), tuple(g.get("betas", ())), g.get("decoupled_weight_decay"))
                           for g in run.opt.param_groups)
        if captured:
            torch._dynamo.mark_static_address(self.lr)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            if not _compiler_failed(e):
                raise
            raise CompileFailed(self.run.device.type, _reason(e)) from None

    def step(self, x: torch.Tensor, lr: float):
        owner, run = self.owner, self.run
        if self.captured:
            torch.compiler.cudagraph_mark_step_begin()
        run.model.train()
        ce, loss = self._call(self.forward, x)
        ce = ce.detach().double()  # out of the graph's memory before the next graph runs
        if owner.skips(ce):
            return ce, None, None
        run.opt.zero_grad(set_to_none=True)
        self._call(loss.backward)  # the backward graph compiles on its first call
        params = list(run.model.parameters())
        with_grad = [p for p in params if p.grad is not None]
        grad_noise = [torch.randn(p.shape, generator=run.noise_gen, device=p.device)
                      for p in with_grad] if run.grad_std > 0 else []
        param_noise = [torch.randn(p.shape, generator=run.noise_gen, device=p.device)
                       for p in params] if run.beta is not None else []
        self.lr.fill_(lr)
        position = {id(p): i for i, p in enumerate(with_grad)}
        groups = [[position[id(p)] for p in g["params"] if id(p) in position] for g in run.opt.param_groups]
        states = [self._state(with_grad[i]) for i in range(len(with_grad))] if not self.sgd else []
        grad_norm, theta = self._call(self.update, with_grad, [p.grad for p in with_grad], groups, states,
                                      grad_noise, params, param_noise)
        grad_norm, theta = grad_norm.double(), theta.clone()
        run.opt.zero_grad(set_to_none=True)  # no gradient outlives its graph's step
        return ce, grad_norm, theta

    def _state(self, p: torch.Tensor) -> dict:
        """Adam's state of ``p`` in its capturable form (created as ``torch.optim.Adam`` would)."""
        s = self.run.opt.state[p]
        if not s:
            s["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            s["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            s["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        elif s["step"].device != p.device:
            s["step"] = s["step"].to(device=p.device, dtype=torch.float32)
        if self.captured:
            for t in (s["step"], s["exp_avg"], s["exp_avg_sq"]):
                torch._dynamo.mark_static_address(t)
        return s

    def _forward(self, x: torch.Tensor):
        run = self.run
        with torch.autocast(run.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            ce = run.model(input_ids=x, labels=x).loss.float()
        return ce, self.owner.with_l2(ce)

    def _update(self, with_grad, grads, groups, states, grad_noise, params, param_noise):
        from torch.optim.adam import adam
        from torch.optim.sgd import sgd

        run = self.run
        with torch.no_grad():
            if grad_noise:
                grads = [torch.add(g, z, alpha=run.grad_std) for g, z in zip(grads, grad_noise)]
            norm = torch.nn.utils.get_total_norm(grads, 2.0)
            coef = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
            grads = [g * coef for g in grads]
            for (weight_decay, eps, betas, decoupled), idx in zip(self.hyper, groups):
                ps, gs = [with_grad[i] for i in idx], [grads[i] for i in idx]
                if self.sgd:
                    sgd(ps, gs, [None] * len(ps), foreach=True, fused=False, weight_decay=weight_decay,
                        momentum=0.0, lr=self.lr, dampening=0.0, nesterov=False, maximize=False)
                    continue
                st = [states[i] for i in idx]
                adam(ps, gs, [s["exp_avg"] for s in st], [s["exp_avg_sq"] for s in st], [], [s["step"] for s in st],
                     foreach=True, capturable=True, differentiable=False, fused=False, has_complex=False,
                     decoupled_weight_decay=decoupled, amsgrad=False, beta1=betas[0], beta2=betas[1], lr=self.lr,
                     weight_decay=weight_decay, eps=eps, maximize=False)
            if param_noise:
                scale = torch.sqrt(2.0 * self.lr.double() / run.beta).float()
                for p, z in zip(params, param_noise):
                    p.add_(z * scale)
            theta = torch.stack([p.detach().double().pow(2).sum() for p in params if p.requires_grad]).sum()
        return norm, theta


class _Undo:
    """What a compiled step may change, as it was before it: the random streams, and with
    ``weights`` the model's tensors and the optimizer state (copies on the device)."""

    def __init__(self, run, weights: bool):
        self.run, self.weights = run, weights
        self.rng = (torch.get_rng_state(), run.noise_gen.get_state(),
                    torch.cuda.get_rng_state(run.device) if run.device.type == "cuda" else None)
        if weights:
            self.tensors = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
            self.opt = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in st.items()}
                        for p, st in run.opt.state.items()}

    def restore(self) -> None:
        run = self.run
        torch.set_rng_state(self.rng[0])
        run.noise_gen.set_state(self.rng[1])
        if self.rng[2] is not None:
            torch.cuda.set_rng_state(self.rng[2], run.device)
        run.opt.zero_grad(set_to_none=True)
        if not self.weights:
            return
        with torch.no_grad():
            for k, v in run.model.state_dict().items():
                v.copy_(self.tensors[k])
        for p in list(run.opt.state):
            if p in self.opt:
                run.opt.state[p] = self.opt[p]
            else:
                del run.opt.state[p]


class PendingRows:
    """The rows of steps whose values are still on the device (see the module docstring)."""

    def __init__(self, run):
        self.run = run
        self.every = ROWS_PER_SYNC.get(run.device.type, 1)
        self.rows: list[Pending] = []
        self.since = time.monotonic()

    def add(self, row: Pending) -> None:
        self.rows.append(row)

    def due(self) -> bool:
        """Whether the rows should reach the host now (a boundary may ask earlier)."""
        return len(self.rows) >= self.every or time.monotonic() - self.since >= SYNC_EVERY_S

    def flush(self) -> Iterator[dict]:
        """The held rows as step-log rows (``LOG_FIELDS`` + ``tokens_seen``), in order, after
        one device-to-host copy; the run's wall clock and checkpoint losses advance with them.
        A non-finite loss of a step that was not skipped raises :class:`TrainingDiverged`
        (``train.nonfinite: stop``) when its row is reached."""
        rows, self.rows, self.since = self.rows, [], time.monotonic()
        if not rows:
            return
        values = torch.stack([r.values for r in rows]).cpu().tolist()
        run = self.run
        for r, (loss, grad_norm, theta) in zip(rows, values):
            seconds = r.seconds if isinstance(r.seconds, float) else r.seconds[0].elapsed_time(r.seconds[1]) / 1e3
            if not r.skipped and not math.isfinite(loss):
                run.nonfinite(loss, r.step)
            run.wall += seconds
            if not r.skipped:
                run.ckpt_losses.append(loss)
            yield {"step": r.step, "loss": loss, "lr": r.lr, "grad_norm": grad_norm, "theta_sq_norm": theta,
                   "tokens_per_s": r.tokens / max(seconds, 1e-12), "wall_clock_s": run.wall, "skipped": int(r.skipped),
                   "tokens_seen": r.tokens_seen}
