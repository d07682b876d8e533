"""One resumable training segment of one run (dataset, variant, λ, seed).

A segment continues from the checkpoint at its start step (weights, optimizer, scheduler
and RNG state) and runs to its end step, writing every checkpoint in between. Inside a
segment a work state is saved every ``train.save_every`` steps under ``work/`` — outside
the declared outputs, so Snakemake's deletion of a failed job's outputs never removes it.
A segment killed mid-way (SIGKILL) and started again resumes from that state and ends
with bit-identical weights on CPU. On the CPU a segment trains on ``train.threads``
threads, never the shell's count (the thread count sets the reduction order of every
kernel), so a segment retrained by hand writes the bytes the workflow wrote. SIGTERM and
SIGUSR1 (a SLURM time limit, preemption, ``scancel``; :mod:`villani.runtime.stop`) stop it at the
next step boundary with a work state written at that step, so the resumed segment
recomputes no step.

Update of one step t → t+1 on the batch B_t (see :mod:`villani.training.batches`), by
variant (:mod:`villani.plan.runs`; its settings from :func:`~villani.plan.runs.variant_params`):

* loss: L_B(θ) (mean token cross-entropy), plus (λ/2)‖θ_dec‖² in ``coupled`` mode
  (``adam_l2`` and ``langevin`` always), so that ∇ = ∇F_B;
* ``adamw`` (and the ``adamw_lr…``/``adamw_wu…`` sweep arms), ``adam_l2``: clip the
  gradient norm, AdamW step (decoupled λ, or none when coupled), warm-up + cosine schedule;
* ``adamw_noise``: ∇ ← ∇ + ξ, ξ ~ N(0, grad_std²·I) before clipping, AdamW step, then
  θ ← θ + √(2η_t/β)·Z, Z ~ N(0, I), β = ``train.adamw_noise.langevin_beta``;
* ``langevin`` — the paper's eq. (36): θ ← θ − η·∇F_B(θ) + √(2η/β)·Z with plain SGD at
  the constant η = ``train.langevin.lr``, no clipping, no schedule; the minibatch noise
  ξ = ∇F_B − ∇F is the only gradient noise; β = ``train.langevin.beta``
  (:func:`villani.plan.runs.langevin_beta`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Mapping

import torch

from villani.runtime import stop
from villani.io import atomic
from villani.io.one_writer import one_writer
from villani.model.causal_lm import model_for_run, num_params, pick_device, theta_sq_norm
from villani.plan import layout
from villani.plan.digest import run_digest
from villani.plan.runs import langevin_beta, variant_kind, variant_params
from villani.plan.schedule import checkpoints_in_segment, segment_start
from villani.plan.writers import command
from villani.runtime.progress import Progress
from villani.training.batches import batch_indices
from villani.training.checkpoint import (check_work_state, load_checkpoint, load_state_file, save_checkpoint,
                                        save_state_file)
from villani.training.optim import decayed_parameter_names, make_optimizer, make_scheduler
from villani.training.provenance import trained_params
from villani.training.segments import (
    check_step_log,
    keep_finished,
    restore_finished,
    segment_status,
    write_manifest,
)
from villani.training.step import PendingRows, TrainStep, step_mode
from villani.training.step_log import StepLog, tensorboard_writer, write_scalars

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """A non-finite loss with ``train.nonfinite: stop``; the message names the step and last good checkpoint."""


class _SegmentState:
    """The mutable state of one training segment (model, optimizer, schedule, RNG streams,
    step and token counters) — the run's identity is :class:`villani.plan.runs.Run`."""

    def __init__(self, params: Mapping, root, dataset: str, variant: str, lam: float, seed: int, device,
                 initial: bool):
        from villani.data import load_split

        self.params, self.root, self.dataset, self.variant = params, root, dataset, variant
        self.lam, self.seed, self.device = float(lam), int(seed), device
        self.t = variant_params(params, variant).train
        self.kind = variant_kind(variant)
        self.ident = dict(dataset=dataset, variant=variant, lam=lam, seed=seed)
        self.digest = run_digest(params, variant, lam, seed)
        self.blocks = load_split(params, root, "train")
        self.model = model_for_run(params, root, seed, initial=initial).to(device)
        self.decayed = set(decayed_parameter_names(self.model, self.t.decay_params))
        self.opt = make_optimizer(self.model, self.t, self.lam, "sgd" if self.kind == "langevin" else "adamw")
        self.sched = make_scheduler(self.opt, self.t, constant=self.kind == "langevin")
        gen_device = device if device.type == "cuda" else "cpu"
        self.noise_gen = torch.Generator(device=gen_device).manual_seed(self.seed * 7919 + 17)
        torch.manual_seed(self.seed + 1)  # dropout stream, independent of the init stream
        self.step, self.tokens, self.wall = 0, 0, 0.0
        self.ckpt_losses: list[float] = []
        use_bf16 = self.t.precision == "bf16" or (self.t.precision == "auto" and device.type == "cuda")
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16 and device.type == "cuda")
        self.grad_std = self.t.adamw_noise.grad_std if self.kind == "adamw_noise" else 0.0
        self.beta = None
        if self.kind == "adamw_noise":
            self.beta = langevin_beta(self.t.adamw_noise.langevin_beta, self.lam, self.t.lr, self.grad_std)
        elif self.kind == "langevin":
            lv = self.t.langevin
            self.beta = langevin_beta(lv.beta, self.lam, self.t.lr, lv.table1_std)
        self.stepper = TrainStep(self, step_mode(self.t.compile, device), fallback=self.t.compile == "auto")

    # ----------------------------------------------------------------- state
    def state(self) -> dict:
        return {
            "optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict(),
            "torch_rng": torch.get_rng_state(), "noise_rng": self.noise_gen.get_state(),
            "cuda_rng": torch.cuda.get_rng_state() if self.device.type == "cuda" else torch.empty(0, dtype=torch.uint8),
            "step": self.step, "tokens_seen": self.tokens, "wall_clock_s": self.wall, "digest": self.digest,
            "ckpt_losses": list(self.ckpt_losses), "train_step": self.stepper.mode,
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
        if state.get("train_step", self.stepper.mode) != self.stepper.mode:
            log.warning(f"{self.variant} λ={layout.format_lam(self.lam)} seed={self.seed}: resumed at step {self.step} "
                        f"in the {self.stepper.mode} step from a state of the {state['train_step']} step "
                        "(train.compile): from here on a run of that mode, equal to the other within rounding")

    # ----------------------------------------------------------------- one step
    def batch(self, step: int) -> torch.Tensor:
        idx = batch_indices(len(self.blocks), self.t.batch_size, self.seed, step)
        if self.device.type == "cuda":  # from pinned memory, without waiting for the copy
            return self.blocks[idx].pin_memory().to(self.device, non_blocking=True)
        return self.blocks[idx].to(self.device)

    def ce(self, x: torch.Tensor) -> torch.Tensor:
        with self.autocast:
            return self.model(input_ids=x, labels=x).loss.float()

    def train_step(self):
        """One step (:mod:`villani.training.step`); its row, values still on the device."""
        return self.stepper()

    def nonfinite(self, value: float, step: int) -> None:
        """A non-finite loss at ``step``: :class:`TrainingDiverged` unless ``train.nonfinite: skip``."""
        if self.t.nonfinite == "skip":
            return
        good = self.last_checkpoint
        raise TrainingDiverged(
            f"{self.dataset} {self.variant} λ={layout.format_lam(self.lam)} seed={self.seed}: loss is {value} at step "
            f"{step}; last good checkpoint: {good}; set train.nonfinite: skip to skip such steps")

    # ----------------------------------------------------------------- checkpoints
    last_checkpoint: str = "none"

    def checkpoint(self, train_loss: float, with_state: bool = True) -> dict:
        meta = {
            **self.ident, "lam": self.lam, "tokens_seen": self.tokens,
            "wall_clock_s": self.wall, "train_loss": train_loss, "theta_sq_norm": theta_sq_norm(self.model),
            "d": num_params(self.model), "decay_mode": self.t.decay_mode, "decay_params": self.t.decay_params,
            "update_rule": self.kind, "lr_peak": self.t.lr, "langevin_beta": self.beta,
            "decayed_params": sorted(self.decayed),
            "d_decayed": sum(p.numel() for n, p in self.model.named_parameters() if n in self.decayed),
            "digest": self.digest, "train_params": trained_params(self.params, self.variant),
            "device": self.device.type, "cpu_threads": torch.get_num_threads(),
            "precision": "bf16" if self.autocast._enabled else "fp32", "train_step": self.stepper.mode,
        }
        self.ckpt_losses = []
        out = save_checkpoint(self.root, step=self.step, model=self.model, state=self.state() if with_state else None,
                              meta=meta, **self.ident)
        self.last_checkpoint = str(layout.fmt(layout.CKPT_DIR, self.root, step=self.step, **self.ident))
        return out


def _work_path(root, ident) -> Path:
    return layout.fmt(layout.WORK_STATE, root, **ident)


def _save_work(run: _SegmentState, path: Path, step_log: StepLog) -> None:
    """Work state at the current step; the step log is fsync'ed first and its size recorded."""
    on_disk = step_log.sync()
    state = run.state()
    state["model"] = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
    state.update(on_disk)
    save_state_file(path, state)


class _WorkStateRejected(Exception):
    """A work state passed its checks but could not be restored; it has been set aside and
    the model may be half-restored: the segment starts over from its first checkpoint."""


def _set_aside(path: Path, reason: str, start: int) -> None:
    """Move an unusable work state to ``state.invalid.pt`` (kept for inspection, replacing an
    older one) with a one-line warning; the segment restarts from its checkpoint at ``start``."""
    aside = path.with_name("state.invalid.pt")
    path.replace(aside)
    log.warning(f"{reason}; moved to {aside.name}, the segment restarts from its checkpoint at step {start}")


def _try_resume_work(run: _SegmentState, path: Path, start: int, end: int, step_log: StepLog) -> dict | None:
    """Restore the work state if it belongs to this segment and its step log is on disk;
    return ``{"log_bytes", "log_rows"}`` to truncate the log to, or None (start the segment over).
    A torn or ill-formed state (:func:`villani.training.checkpoint.check_work_state`) is set aside, never
    trusted, so a retry is never stuck on it."""
    if not path.exists():
        return None
    try:
        state = check_work_state(load_state_file(path), path, run.model.state_dict())
    except ValueError as e:
        _set_aside(path, str(e), start)
        return None
    if state["digest"] != run.digest or not (start < state["step"] < end):
        return None
    log_bytes, log_rows = state.get("log_bytes"), state.get("log_rows")
    if log_bytes is None or log_rows != int(state["step"]) - start or step_log.size_on_disk() < int(log_bytes):
        return None  # the rows up to this state are not all on disk: start over from the segment's start
    try:
        run.model.load_state_dict(state["model"])
        run.restore(state)
    except (ValueError, KeyError, IndexError, TypeError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        _set_aside(path, f"{path}: cannot be restored ({first})", start)
        raise _WorkStateRejected from None
    return {"log_bytes": int(log_bytes), "log_rows": int(log_rows)}


def _train_steps(run: _SegmentState, *, end: int, wanted, work: Path, step_log: StepLog, tb, what: str,
                 progress) -> list[dict]:
    """Steps up to ``end``: the per-step log, a checkpoint at each step of ``wanted``, the
    work state every ``train.save_every`` steps. A stop signal (SIGTERM, SIGUSR1:
    :mod:`villani.runtime.stop`) is acted on at the next step boundary: the work state is written
    at that step and :class:`villani.runtime.stop.Stopped` raised, so a resumed segment recomputes
    no step. Returns the checkpoints written."""
    written = []
    every, keep_all = run.t.save_every, run.t.keep_state == "all"
    tokens0, wall0 = run.tokens, run.wall
    pending = PendingRows(run)
    with stop.deferred() as stop_flag, Progress(what, end, unit="step", done=run.step, logger=log,
                                                 bar=progress) as bar:
        while run.step < end:
            pending.add(run.train_step())
            if not (pending.due() or run.step in wanted or run.step % every == 0 or stop_flag):
                continue
            for row in pending.flush():  # the rows reach the host; a non-finite loss stops here
                step_log.append(row)
                if tb is not None:
                    write_scalars(tb, row)
                bar.update(row["step"], loss=row["loss"], lr=row["lr"],
                           **{"tokens/s": (row["tokens_seen"] - tokens0) / max(row["wall_clock_s"] - wall0, 1e-12),
                              "‖θ‖²": row["theta_sq_norm"]})
            if run.step in wanted:
                losses = run.ckpt_losses or [row["loss"]]
                written.append(run.checkpoint(sum(losses) / len(losses), with_state=keep_all or run.step == end))
            elif run.step % every == 0 and not stop_flag:
                if tb is not None:
                    tb.flush()
                _save_work(run, work, step_log)
            if stop_flag and run.step < end:
                if tb is not None:
                    tb.flush()
                _save_work(run, work, step_log)
                raise stop_flag.stop(f"{what}: work state saved at step {run.step} in {work}; "
                                     "the same command (or the job's retry) resumes there")
    return written


def training_lock(root, ident: Mapping, first: int, last: int):
    """The run's training lock (:mod:`villani.io.one_writer`), recording that this process
    rewrites checkpoints ``first`` … ``last``: a second ``villani train`` of the run is refused
    in one line naming this one, and so is a ``villani measure`` of a checkpoint in that range."""
    return one_writer(layout.fmt(layout.TRAIN_LOCK, root, **ident),
                      f"run {layout.fmt(layout.RUN_DIR, root, **ident)}", writes=f"checkpoints {first}–{last}",
                      steps=(first, last))


def train_segment(params: Mapping, *, variant: str, lam: float, seed: int, end: int, root="results",
                  device: str | None = None, progress: bool | None = None) -> dict:
    """Train run (variant, λ, seed) up to checkpoint step ``end``; return the segment manifest
    (:func:`villani.training.segments.write_manifest`), written once the step log checks.

    The run's training lock is held throughout (:func:`training_lock`). Progress
    (:class:`villani.runtime.progress.Progress`): a log line at least every progress interval with
    step/end, loss, lr, tokens/s, ‖θ‖² and the segment's ETA; a bar when ``progress`` is
    True, or None and stderr is a terminal. The per-step CSV grows in ``work/`` while the
    segment trains (:mod:`villani.training.step_log`).
    """
    ident = dict(dataset=params.data.name, variant=variant, lam=lam, seed=seed)
    start = segment_start(params.train, end)
    with training_lock(root, ident, start + (start > 0), end):
        return _train_segment(params, ident, end, root, device, progress)


def train_run(params: Mapping, *, variant: str, lam: float, seed: int, root="results", device: str | None = None,
              progress: bool | None = None) -> list[tuple[dict, str | None]]:
    """Train every segment of the run that is not done under ``params``
    (:func:`villani.training.segments.segment_status`: a segment trained under other
    parameters, with a missing, damaged or edited manifest or checkpoint, is trained again),
    holding the run's training lock throughout; return (manifest, why it was trained — None
    for a segment that was done) per segment."""
    from villani.plan.schedule import segment_ends

    ident = dict(dataset=params.data.name, variant=variant, lam=lam, seed=seed)
    out = []
    with training_lock(root, ident, 0, params.train.steps):
        for end in segment_ends(params.train):
            why = segment_status(params, root, ident, end)
            if why is None:
                out.append((json.loads(layout.fmt(layout.SEGMENT, root, step=end, **ident).read_text()), None))
                continue
            if layout.fmt(layout.SEGMENT, root, step=end, **ident).exists():
                log.warning(f"train {variant} λ={layout.format_lam(lam)} seed={seed}: segment ending at {end} is "
                            f"trained again: {why}")
            out.append((train_segment(params, variant=variant, lam=lam, seed=seed, end=end, root=root, device=device,
                                      progress=progress), why))
    return out


def _train_segment(params: Mapping, ident: dict, end: int, root, device, progress) -> dict:
    t = params.train
    start = segment_start(t, end)
    wanted = checkpoints_in_segment(t, end)
    # the segment's start checkpoint is verified too: a damaged input is refused, never skipped
    done = restore_finished(root, ident, end, run_digest(params, ident["variant"], ident["lam"], ident["seed"]),
                            ([start] if start else []) + wanted)
    what = (f"train {ident['dataset']} {ident['variant']} λ={layout.format_lam(ident['lam'])} seed={ident['seed']} "
            f"seg {start}→{end}")
    if done is not None:
        log.info(f"{what}: trained earlier with these parameters; outputs restored from work/done/")
        return done
    device = pick_device(device)
    if device.type == "cpu":  # the reduction order of every CPU kernel: the parameters', never the shell's
        torch.set_num_threads(t.threads)
    run = _SegmentState(params, root, **ident, device=device, initial=start == 0)
    # this job is the one writer of its run's training folders (the training lock) — the
    # checkpoint folders of this segment, segments/, logs/, work/; a killed predecessor's
    # temporaries go (measure/ is not swept)
    folders = [layout.fmt(layout.CKPT_DIR, root, step=s, **ident) for s in wanted]
    folders += [layout.fmt(f, root, step=end, **ident).parent for f in (layout.SEGMENT, layout.SEGMENT_LOG)]
    for folder in [*folders, layout.fmt(layout.WORK_DIR, root, **ident)]:
        atomic.remove_stale_temps(folder)
    resumed_from = None
    if start > 0:
        _continue_from(run, root, ident, start)
    work = _work_path(root, ident)
    step_log = StepLog(layout.fmt(layout.SEGMENT_LOG_PARTIAL, root, step=end, **ident),
                       layout.fmt(layout.SEGMENT_LOG, root, step=end, **ident))
    try:
        on_disk = _try_resume_work(run, work, start, end, step_log)
    except _WorkStateRejected:  # set aside: start over from a freshly loaded checkpoint
        return _train_segment(params, ident, end, root, device, progress)
    if on_disk is not None:
        resumed_from = run.step
        step_log.open(on_disk["log_bytes"], on_disk["log_rows"])
        log.info(f"{what}: resumed from the work state at step {resumed_from}")
    else:
        step_log.open()
    # the manifest says the segment is done: a segment trained again is not, until it ends —
    # removed only now, when its first checkpoint is about to be rewritten, so a job that
    # fails while it prepares (unreadable data, a damaged start checkpoint) leaves the
    # manifest vouching for the checkpoints it still describes
    layout.fmt(layout.SEGMENT, root, step=end, **ident).unlink(missing_ok=True)
    tb = tensorboard_writer(layout.fmt(layout.TENSORBOARD_DIR, root, **ident), run.step) if t.tensorboard else None
    if start == 0 and resumed_from is None:
        run.model.eval()
        with torch.no_grad():
            loss0 = float(run.ce(run.batch(0)))
        run.checkpoint(loss0, with_state=t["keep_state"] == "all")
    try:
        _train_steps(run, end=end, wanted=wanted, work=work, step_log=step_log, tb=tb, what=what, progress=progress)
    finally:
        if tb is not None:
            tb.close()
        step_log.close()
    return _finish(params, root, ident, end, step_log, work, resumed_from)


def _continue_from(run: _SegmentState, root, ident: dict, start: int) -> None:
    """Load the segment's start checkpoint (weights, optimizer, schedule, random streams),
    written under the run's parameters; a warning names what the checkpoint records of
    how it was trained that differs here (the device, the CPU threads, the precision: what
    no parameter fixes), since this segment's weights then differ from a run trained in one
    go within rounding."""
    meta, state = load_checkpoint(root, step=start, model=run.model, with_state=True, **ident)
    if state.get("digest") != run.digest:
        raise ValueError(
            f"{layout.fmt(layout.CKPT_STATE, root, step=start, **ident)}: written with other parameters "
            f"(digest {state.get('digest')} ≠ {run.digest}); train the earlier segments again: "
            f"`{command(layout.fmt(layout.CKPT_STATE, root, step=start, **ident))}`")
    run.restore(state)
    run.last_checkpoint = str(layout.fmt(layout.CKPT_DIR, root, step=start, **ident))
    here = {"device": run.device.type, "precision": "bf16" if run.autocast._enabled else "fp32",
            "cpu_threads": torch.get_num_threads() if run.device.type == "cpu" else meta.get("cpu_threads")}
    differ = [f"{k} {meta[k]} there, {v} here" for k, v in here.items() if meta.get(k) not in (None, v)]
    if differ:
        log.warning(f"train {run.variant} λ={layout.format_lam(run.lam)} seed={run.seed}: continues from the "
                    f"checkpoint at step {start} trained otherwise ({'; '.join(differ)}): from here on equal to "
                    "a run trained in one go within rounding, not bit for bit")


def _finish(params: Mapping, root, ident: dict, end: int, step_log: StepLog, work: Path, resumed_from) -> dict:
    """Check the step log, publish it, write the manifest (the segment is done) and its
    copies; a damaged log is set aside with the work state, and the segment is not done."""
    start = segment_start(params.train, end)
    try:
        check_step_log(step_log.partial, start, end)
    except ValueError as e:
        step_log.partial.replace(step_log.partial.with_suffix(".invalid.csv"))
        work.unlink(missing_ok=True)
        raise ValueError(f"{e}; the segment is not marked done (log moved to "
                         f"{step_log.partial.with_suffix('.invalid.csv').name}): train it again: "
                         f"`{command(layout.fmt(layout.SEGMENT, root, step=end, **ident))}`") from None
    step_log.publish()
    manifest = write_manifest(params, root, ident, end, resumed_from)
    keep_finished(root, ident, end, manifest["digest"])
    work.unlink(missing_ok=True)
    return manifest
