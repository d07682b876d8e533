"""One resumable training segment of one run (dataset, variant, λ, seed).

A segment continues from the checkpoint at its start step (weights, optimizer, scheduler
and RNG state) and runs to its end step, writing every checkpoint in between. Inside a
segment a work state is saved every ``train.save_every`` steps under ``work/`` — outside
the declared outputs, so Snakemake's deletion of a failed job's outputs never removes it.
A segment killed mid-way (SIGKILL, SLURM time limit, scancel) and started again resumes
from that state and ends with bit-identical weights on CPU.

Update of one step t → t+1 on the batch B_t (see :mod:`villani.training.batches`):

* loss: L_B(θ) (mean token cross-entropy), plus (λ/2)‖θ_dec‖² in ``coupled`` mode;
* ``noise`` variant: ∇ ← ∇ + ξ, ξ ~ N(0, grad_std²·I), then after the optimizer step
  θ ← θ + √(2η_t/β)·Z, Z ~ N(0, I) (SPEC eq. 36), with β = ``langevin_beta``, or 1/λ
  (null: the paper's Villani prior), or 2/(η·grad_std²) (``table1``: the paper's Table I
  rule β⁻¹ = ησ²/(2d) with σ² = grad_std²·d, which makes the Langevin step η·grad_std);
* AdamW step (decoupled λ) and the warm-up + cosine schedule.
"""

from __future__ import annotations

import csv
import io
import math
import time
from pathlib import Path
from typing import Mapping

import torch
from tqdm import tqdm

from villani.io import atomic
from villani.model import model_for_run, num_params, pick_device, theta_sq_norm
from villani.plan import layout
from villani.plan.digest import run_digest
from villani.plan.schedule import checkpoints_in_segment, segment_start
from villani.training.batches import batch_indices
from villani.training.checkpoint import (
    load_checkpoint,
    load_state_file,
    save_checkpoint,
    save_state_file,
)
from villani.training.optim import (
    decayed_parameter_names,
    l2_penalty,
    make_optimizer,
    make_scheduler,
)

LOG_FIELDS = ("step", "loss", "lr", "grad_norm", "theta_sq_norm", "tokens_per_s", "wall_clock_s", "skipped")


class TrainingDiverged(RuntimeError):
    """A non-finite loss with ``train.nonfinite: stop``; the message names the step and last good checkpoint."""


def langevin_beta(noise: Mapping, lam: float, lr: float) -> float | None:
    """Inverse temperature β of the Langevin term, or None for no Langevin term."""
    beta = noise.get("langevin_beta")
    if beta == "table1":
        return 2.0 / (lr * noise["grad_std"] ** 2) if noise["grad_std"] > 0 else None
    if beta:
        return float(beta)
    return 1.0 / lam if lam > 0 else None


class _SegmentState:
    """The mutable state of one training segment (model, optimizer, schedule, RNG streams,
    step and token counters, log rows) — the run's identity is :class:`villani.plan.runs.Run`."""

    def __init__(self, params: Mapping, root, dataset: str, variant: str, lam: float, seed: int, device,
                 initial: bool):
        from villani.data import load_blocks

        self.params, self.root, self.dataset, self.variant = params, root, dataset, variant
        self.lam, self.seed, self.device = float(lam), int(seed), device
        self.t = params["train"]
        self.ident = dict(dataset=dataset, variant=variant, lam=lam, seed=seed)
        self.digest = run_digest(params, variant, lam, seed)
        self.blocks = load_blocks(layout.fmt(layout.SPLIT, root, dataset=dataset, split="train"))
        self.model = model_for_run(params, root, seed, initial=initial).to(device)
        self.decayed = set(decayed_parameter_names(self.model, self.t["decay_params"]))
        self.opt = make_optimizer(self.model, self.t, self.lam)
        self.sched = make_scheduler(self.opt, self.t)
        gen_device = device if device.type == "cuda" else "cpu"
        self.noise_gen = torch.Generator(device=gen_device).manual_seed(self.seed * 7919 + 17)
        torch.manual_seed(self.seed + 1)  # dropout stream, independent of the init stream
        self.step, self.tokens, self.wall = 0, 0, 0.0
        self.rows: list[dict] = []  # log rows of this segment
        self.ckpt_losses: list[float] = []
        use_bf16 = self.t["precision"] == "bf16" or (self.t["precision"] == "auto" and device.type == "cuda")
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16 and device.type == "cuda")
        self.beta = langevin_beta(self.t["noise"], self.lam, float(self.t["lr"])) if variant == "noise" else None

    # ----------------------------------------------------------------- state
    def state(self) -> dict:
        return {
            "optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict(),
            "torch_rng": torch.get_rng_state(), "noise_rng": self.noise_gen.get_state(),
            "cuda_rng": torch.cuda.get_rng_state() if self.device.type == "cuda" else torch.empty(0, dtype=torch.uint8),
            "step": self.step, "tokens_seen": self.tokens, "wall_clock_s": self.wall, "digest": self.digest,
            "ckpt_losses": list(self.ckpt_losses),
        }

    def restore(self, state: Mapping) -> None:
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        self.noise_gen.set_state(state["noise_rng"])
        if self.device.type == "cuda" and state["cuda_rng"].numel():
            torch.cuda.set_rng_state(state["cuda_rng"])
        self.step, self.tokens, self.wall = int(state["step"]), int(state["tokens_seen"]), float(state["wall_clock_s"])
        self.ckpt_losses = list(state.get("ckpt_losses", []))

    # ----------------------------------------------------------------- one step
    def batch(self, step: int) -> torch.Tensor:
        idx = batch_indices(len(self.blocks), int(self.t["batch_size"]), self.seed, step)
        return self.blocks[idx].to(self.device)

    def ce(self, x: torch.Tensor) -> torch.Tensor:
        with self.autocast:
            return self.model(input_ids=x, labels=x).loss.float()

    def train_step(self) -> dict:
        x = self.batch(self.step)
        lr = self.opt.param_groups[0]["lr"]
        t0 = time.perf_counter()
        self.model.train()
        ce = self.ce(x)
        loss = ce + l2_penalty(self.model, self.decayed, self.lam) if (
            self.t["decay_mode"] == "coupled" and self.lam > 0) else ce
        skipped = not math.isfinite(float(ce.detach()))
        if skipped:
            self._nonfinite(float(ce.detach()))
            self.opt.zero_grad(set_to_none=True)
            grad_norm = float("nan")
        else:
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if self.variant == "noise" and self.t["noise"]["grad_std"] > 0:
                for p in self.model.parameters():
                    if p.grad is not None:
                        p.grad.add_(torch.randn(p.shape, generator=self.noise_gen, device=p.device),
                                    alpha=float(self.t["noise"]["grad_std"]))
            max_norm = self.t["grad_clip"] if self.t["grad_clip"] else float("inf")
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
            self.opt.step()
            if self.beta is not None:
                scale = math.sqrt(2.0 * lr / self.beta)
                with torch.no_grad():
                    for p in self.model.parameters():
                        p.add_(torch.randn(p.shape, generator=self.noise_gen, device=p.device), alpha=scale)
        self.sched.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        self.step += 1
        self.tokens += x.numel()
        self.wall += dt
        row = {"step": self.step, "loss": float(ce.detach()), "lr": lr, "grad_norm": grad_norm,
               "theta_sq_norm": theta_sq_norm(self.model), "tokens_per_s": x.numel() / max(dt, 1e-12),
               "wall_clock_s": self.wall, "skipped": int(skipped)}
        if not skipped:
            self.ckpt_losses.append(row["loss"])
        return row

    def _nonfinite(self, value: float) -> None:
        if self.t["nonfinite"] == "skip":
            return
        good = self.last_checkpoint
        raise TrainingDiverged(
            f"{self.dataset} {self.variant} λ={layout.format_lam(self.lam)} seed={self.seed}: loss is {value} at step "
            f"{self.step + 1}; last good checkpoint: {good}; set train.nonfinite: skip to skip such steps")

    # ----------------------------------------------------------------- checkpoints
    last_checkpoint: str = "none"

    def checkpoint(self, train_loss: float, with_state: bool = True) -> dict:
        meta = {
            **self.ident, "lam": self.lam, "tokens_seen": self.tokens,
            "wall_clock_s": self.wall, "train_loss": train_loss, "theta_sq_norm": theta_sq_norm(self.model),
            "d": num_params(self.model), "decay_mode": self.t["decay_mode"], "decay_params": self.t["decay_params"],
            "decayed_params": sorted(self.decayed),
            "d_decayed": sum(p.numel() for n, p in self.model.named_parameters() if n in self.decayed),
            "digest": self.digest, "device": self.device.type,
            "precision": "bf16" if self.autocast._enabled else "fp32",
        }
        self.ckpt_losses = []
        out = save_checkpoint(self.root, step=self.step, model=self.model, state=self.state() if with_state else None,
                              meta=meta, **self.ident)
        self.last_checkpoint = str(layout.fmt(layout.CKPT_DIR, self.root, step=self.step, **self.ident))
        return out


def _work_path(root, ident) -> Path:
    return layout.fmt(layout.WORK_DIR, root, **ident) / "state.pt"


def _save_work(run: _SegmentState, path: Path) -> None:
    state = run.state()
    state["model"] = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
    state["rows"] = [dict(r) for r in run.rows]
    save_state_file(path, state)


def _try_resume_work(run: _SegmentState, path: Path, start: int, end: int) -> bool:
    if not path.exists():
        return False
    try:
        state = load_state_file(path)
    except ValueError:
        path.unlink(missing_ok=True)  # a torn work state is discarded, never trusted
        return False
    if state.get("digest") != run.digest or not (start < int(state["step"]) < end):
        return False
    run.model.load_state_dict(state["model"])
    run.restore(state)
    run.rows = [dict(r) for r in state["rows"]]
    return True


def _write_log(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_FIELDS)
    w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in LOG_FIELDS})
    atomic.write_text(path, buf.getvalue())


def train_segment(params: Mapping, *, variant: str, lam: float, seed: int, end: int, root="results",
                  device: str | None = None, progress: bool | None = None) -> dict:
    """Train run (variant, λ, seed) up to checkpoint step ``end``; return the segment manifest."""
    t = params["train"]
    dataset = params["data"]["name"]
    start = segment_start(t, end)
    wanted = checkpoints_in_segment(t, end)
    run = _SegmentState(params, root, dataset, variant, lam, seed, pick_device(device), initial=start == 0)
    ident = run.ident
    resumed_from = None
    if start > 0:
        _, state = load_checkpoint(root, step=start, model=run.model, with_state=True, **ident)
        if state.get("digest") != run.digest:
            raise ValueError(
                f"{layout.fmt(layout.CKPT_STATE, root, step=start, **ident)}: written with other parameters "
                f"(digest {state.get('digest')} ≠ {run.digest}); rerun the earlier segments")
        run.restore(state)
        run.last_checkpoint = str(layout.fmt(layout.CKPT_DIR, root, step=start, **ident))
    work = _work_path(root, ident)
    if _try_resume_work(run, work, start, end):
        resumed_from = run.step
    written = []
    keep_all = t["keep_state"] == "all"
    if start == 0 and resumed_from is None:
        run.model.eval()
        with torch.no_grad():
            loss0 = float(run.ce(run.batch(0)))
        written.append(run.checkpoint(loss0, with_state=keep_all))
    every = int(t["save_every"])
    bar = tqdm(total=end - start, initial=run.step - start, disable=None if progress is None else not progress,
               desc=f"train λ={layout.format_lam(lam)} seed={seed} {variant}", unit="step", leave=False)
    with bar:
        while run.step < end:
            row = run.train_step()
            run.rows.append(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}")
            if run.step in wanted:
                losses = run.ckpt_losses or [row["loss"]]
                written.append(run.checkpoint(sum(losses) / len(losses), with_state=keep_all or run.step == end))
            elif run.step % every == 0:
                _save_work(run, work)
    _write_log(layout.fmt(layout.SEGMENT_LOG, root, step=end, **ident), run.rows)
    manifest = {
        **ident, "lam": float(lam), "start": start, "end": end, "digest": run.digest,
        "resumed_from_work_step": resumed_from,
        "checkpoints": [{"step": s, "weights_sha256": _sha(root, ident, s)} for s in wanted],
    }
    atomic.write_json(layout.fmt(layout.SEGMENT, root, step=end, **ident), manifest)
    work.unlink(missing_ok=True)
    return manifest


def _sha(root, ident, step) -> str:
    from villani.training.checkpoint import read_meta

    return read_meta(root, step=step, verify=False, **ident)["weights_sha256"]
