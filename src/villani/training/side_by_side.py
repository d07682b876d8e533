"""The runs of several seeds side by side on one device: ``villani train --seed s1 s2 … --per-device k``.

One ``villani train`` process per seed — the same arguments with one seed each, the torch
threads divided among them — at most k at a time, all on the job's one device. Each process
is an ordinary single-run training with its own files, digest, work state, step log and
random streams, so a run trained side by side is bit-identical to the same run trained
alone (``tests/training/test_side_by_side.py``, on the CPU). This is how a GPU that one run at
the paper's 1 × 512 tokens leaves mostly idle takes several (``jobs.runs_per_device``;
:mod:`villani.dag.targets` makes one workflow job of the seeds of one (update rule, λ)).

The processes share the device by the driver's time slicing, or — ``VILLANI_MPS=1`` in the
environment, on CUDA — through NVIDIA's Multi-Process Service, which lets their kernels run
at once: a control daemon for this command alone (its pipe and log folders in a temporary
folder, the children pointed at them), quit at the end. Where the cluster starts MPS itself
(SLURM's ``gres/mps``) nothing is needed here (docs/slurm.md).

A stop signal (SIGTERM, SIGUSR1: a time limit, ``scancel``) is passed to every process —
each writes its work state at the step it reached and exits 75 — and no further process
starts; the command then stops with exit 75 too, and run again it resumes each where it
stopped. A process that fails does not stop the others (a retry finds their segments done);
the command then fails with one line naming the seeds, their errors above it in the log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterator

from villani.runtime import stop
from villani.plan.layout import format_lam

log = logging.getLogger(__name__)


def _child_argv(args, seed: int, threads: int) -> list[str]:
    """``villani train`` of one seed with ``args``' parameters, results, device and step option."""
    argv = [sys.executable, "-m", "villani.cli", "train"]
    for f in args.params or []:
        argv += ["--params", str(f)]
    argv += ["--results", str(args.results), "--threads", str(threads)]
    for flag, value in (("--dataset", args.dataset), ("--device", args.device), ("--log-level", args.log_level),
                        ("--progress-interval", args.progress_interval)):
        if value is not None:
            argv += [flag, str(value)]
    if args.traceback:
        argv.append("--traceback")
    argv += ["--variant", args.variant, "--lam", repr(float(args.lam)), "--seed", str(seed)]
    return argv + (["--all"] if args.all else ["--until", str(args.until)])


@contextlib.contextmanager
def _mps(device: str | None) -> Iterator[dict]:
    """The children's environment; with ``VILLANI_MPS=1`` an MPS control daemon of their own."""
    env = dict(os.environ)
    if env.get("VILLANI_MPS") != "1":
        yield env
        return
    from villani.model.causal_lm import pick_device

    kind = pick_device(device).type
    if kind != "cuda":
        raise ValueError(f"VILLANI_MPS=1: MPS shares a CUDA device, and this command trains on {kind}; "
                         "unset VILLANI_MPS")
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        raise ValueError("VILLANI_MPS=1: nvidia-cuda-mps-control is not on PATH (NVIDIA's driver utilities); "
                         "unset VILLANI_MPS to share the GPU by time slicing")
    with tempfile.TemporaryDirectory(prefix="villani-mps-") as tmp:
        env.update(CUDA_MPS_PIPE_DIRECTORY=os.path.join(tmp, "pipe"), CUDA_MPS_LOG_DIRECTORY=os.path.join(tmp, "log"))
        for folder in (env["CUDA_MPS_PIPE_DIRECTORY"], env["CUDA_MPS_LOG_DIRECTORY"]):
            os.makedirs(folder)
        subprocess.run([control, "-d"], env=env, check=True)
        log.info(f"MPS control daemon started for this job ({tmp})")
        try:
            yield env
        finally:
            subprocess.run([control], input="quit\n", text=True, env=env, check=False)


def train_side_by_side(args, seeds: list[int]) -> None:
    """Train the runs of ``seeds`` (``args``: a parsed ``villani train`` command), at most
    ``args.per_device`` at a time; return when all have ended (see the module docstring)."""
    k = min(int(args.per_device), len(seeds))
    total = args.threads or len(os.sched_getaffinity(0))
    threads = max(1, total // k)
    what = f"train {args.variant} λ={format_lam(args.lam)} seeds {' '.join(map(str, seeds))}"
    waiting, running, codes = list(seeds), {}, {}
    with _mps(args.device) as env, stop.deferred() as flag:
        log.info(f"{what}: {k} at a time on one device, {threads} thread(s) each")
        forwarded = False
        try:
            while waiting or running:
                while waiting and len(running) < k and not flag:
                    seed = waiting.pop(0)
                    running[seed] = subprocess.Popen(_child_argv(args, seed, threads), env=env)
                if flag and not forwarded:
                    for proc in running.values():
                        proc.send_signal(signal.Signals[flag.signame])
                    forwarded = True
                for seed, proc in list(running.items()):
                    if proc.poll() is not None:
                        codes[seed] = proc.returncode
                        del running[seed]
                time.sleep(0.05)
        finally:  # interrupted (Ctrl-C reaches the children too): let them end before we do
            for proc in running.values():
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
    failed = sorted(s for s, c in codes.items() if c not in (0, stop.EXIT_STOPPED))
    if failed:
        raise ValueError(f"{what}: the run of seed(s) {' '.join(map(str, failed))} failed (exit "
                         f"{', '.join(str(codes[s]) for s in failed)}; the error is above in this log)")
    stopped = sorted([s for s, c in codes.items() if c == stop.EXIT_STOPPED] + waiting)
    if stopped:
        raise flag.stop(f"{what}: seed(s) {' '.join(map(str, stopped))} stopped with their work states saved; "
                        "the same command resumes them")
