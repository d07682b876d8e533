"""``villani diagnose``: its options and the command (:mod:`villani.measure.diagnose` does
the work). Its options are checked while parsing: counts bounded as the parameter file
bounds them (``--probes`` ≤ 100,000 like ``measure.num_probes``), seeds ≥ 0, s > 0."""

from __future__ import annotations

import argparse
import os

from villani.cli.options import MAX_COUNT, MAX_PROBES, device_name, integer, real

HELP = "Ψ_s(λ) of any pretrained causal LM from one measurement (no parameter file; writes under --out)"


def add_parser(sub, common: argparse.ArgumentParser) -> None:
    """The ``diagnose`` subcommand; ``common``: the options it takes of every command's
    (not ``--params``/``--dataset``: it reads no parameter file)."""
    dg = sub.add_parser("diagnose", parents=[common], help=HELP, description=HELP)
    dg.add_argument("--model", required=True, help="hub name or save_pretrained directory of a causal LM "
                    "(a villani checkpoint folder ckpt/step<t>/ works as it is)")
    dg.add_argument("--data", required=True, metavar="SOURCE", help="text source: builtin:pydoc, hf:<dataset>[:<config>], "
                    "hf-disk:<dir> or files:<path or glob> (as data.source)")
    dg.add_argument("--text-column", default="text", help="text column of an hf/hf-disk source (default: text)")
    dg.add_argument("--revision", default=None, help="revision of an hf: hub dataset")
    dg.add_argument("--split", default="train", choices=["train", "validation", "test"],
                    help="split to measure on (default: train)")
    dg.add_argument("--tokenizer", default=None, help="tokenizer name or directory (default: the model's; "
                    "results/data/<dataset> is the pipeline's)")
    dg.add_argument("--min-distinct-tokens", type=integer(1, MAX_COUNT), default=16, metavar="N",
                    help="refuse a tokenizer that maps the text to fewer distinct tokens (default: 16)")
    dg.add_argument("--seq-len", type=integer(2, MAX_COUNT), default=None,
                    help="tokens per block (default: min(256, max positions))")
    dg.add_argument("--blocks", type=integer(1, MAX_COUNT), default=16,
                    help="blocks in the measurement set (default: 16)")
    dg.add_argument("--batch-size", type=integer(1, MAX_COUNT), default=4, help="blocks per micro-batch (default: 4)")
    dg.add_argument("--set-seed", type=integer(0), default=0, help="seed of the block choice (default: 0)")
    dg.add_argument("--probes", type=integer(2, MAX_PROBES), default=32,
                    help=f"Hutchinson probes M, 2 to {MAX_PROBES:,} (default: 32)")
    dg.add_argument("--probe-seed", type=integer(0), default=0, help="probe seed (default: 0)")
    dg.add_argument("--top-k", type=integer(1, 1000), default=5, help="top eigenvalues of ∇²L (default: 5)")
    dg.add_argument("--lanczos-steps", type=integer(1, 10_000), default=None,
                    help="Lanczos steps (default: max(3k, 20))")
    dg.add_argument("--s-values", "--s", dest="s", type=real(0.0, strict=True), nargs="+", default=[1.0],
                    help="s values of Ψ_s (default: 1; under torchrun write --s-values: it reads --s as --standalone)")
    dg.add_argument("--lam-grid", nargs="+", default=None, metavar="L",
                    help="λ values, or lo:hi:n for n log-spaced (default: around the sign changes)")
    dg.add_argument("--sharded", choices=["exact", "fsdp"], default=None,
                    help="under torchrun: exact data-parallel HVPs (model replicated) or finite differences on an "
                         "FSDP2-sharded model")
    dg.add_argument("--basis-device", default=None, type=device_name, help="where the Lanczos basis is kept "
                    "(default: the model's device; cpu: host memory, for models that fill the GPU)")
    dg.add_argument("--out", default=None, metavar="DIR", help="output folder (default: RESULTS/diagnose/<model>)")


def _init_sharded(args) -> int:
    """Join the torchrun process group; return this process's rank."""
    import torch
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        raise ValueError("--sharded: run under torchrun (or srun) with WORLD_SIZE ≥ 2")
    cuda = torch.cuda.is_available() and args.device != "cpu"
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    args.device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    return dist.get_rank()


def cmd_diagnose(args) -> None:
    from pathlib import Path

    from villani.measure.diagnose import diagnose, parse_lam_grid, write_diagnosis

    data = {"source": args.data, "text_column": args.text_column, "revision": args.revision}
    if args.data.startswith("files:") and args.data != "files:":
        data.update(source="files", files={"train": args.data[len("files:"):]})
    lam_grid = parse_lam_grid(args.lam_grid)
    rank = _init_sharded(args) if args.sharded else 0
    try:
        record, curve = diagnose(args.model, data, tokenizer=args.tokenizer, split=args.split, seq_len=args.seq_len,
                                 blocks=args.blocks, batch_size=args.batch_size, set_seed=args.set_seed,
                                 probes=args.probes, probe_seed=args.probe_seed, top_k=args.top_k,
                                 lanczos_steps=args.lanczos_steps, s_values=args.s, lam_grid=lam_grid,
                                 device=args.device, sharded=args.sharded, basis_device=args.basis_device,
                                 min_distinct_tokens=args.min_distinct_tokens)
    finally:
        if args.sharded:
            import torch.distributed as dist

            dist.destroy_process_group()
    if rank != 0:
        return
    from villani.figures.diagnosis import plot_psi_of_lambda

    out = Path(args.out or Path(args.results) / "diagnose" / (Path(args.model.rstrip("/")).name or "model"))
    paths = write_diagnosis(record, curve, out)
    figures = plot_psi_of_lambda(record, curve, out)
    print("\n".join(summary_lines(record)))
    print("wrote " + ", ".join([paths["json"], paths["curve"], *figures]))


def summary_lines(record) -> list[str]:
    """What ``villani diagnose`` prints of its record."""
    from villani.figures.style import fmt_num
    from villani.measure.diagnose import describe_sign_change

    tr = record["trace_L"]
    ci = tr["ci95"] or [float("nan")] * 2
    lines = [f"{record['model']['source']} ({record['model']['architecture']}): d = {record['d']:,}, "
             f"{record['data']['num_tokens']:,} tokens, L = {record['loss']:.4g}",
             f"tr ∇²L = {fmt_num(tr['mean'], 4)}  95% CI [{fmt_num(ci[0], 4)}, {fmt_num(ci[1], 4)}]  "
             f"(M = {tr['num_probes']})",
             f"‖∇L‖² = {fmt_num(record['grad_L_sq_norm'], 4)}  θ·∇L = {fmt_num(record['theta_dot_grad_L'], 4)}  "
             f"‖θ‖² = {fmt_num(record['theta_sq_norm'], 4)}",
             "top eigenvalues of ∇²L (± Ritz residual): " + ", ".join(
                 f"{fmt_num(v, 4)} ± {fmt_num(r, 2)}" for v, r in zip(record["top_eigenvalues"],
                                                                     record["top_residuals"]))]
    for key, info in record["psi_s"].items():
        changes = "; ".join(map(describe_sign_change, info["sign_changes"])) or "none on λ ≥ 0"
        lines.append(f"Ψ_{key}(0) = {fmt_num(info['psi_at_zero'], 4)}; sign change: {changes}")
    return lines
