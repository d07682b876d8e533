"""The ``villani`` command line: one subcommand per workflow stage.

Every Snakemake rule and DVC stage runs exactly one of these. Parameters come from one or
more YAML files (``--params``, later files override earlier ones; default ``params.yaml``),
validated before anything runs. A document that names several datasets (``datasets:``)
needs ``--dataset NAME`` for the commands of one dataset's stage; ``fetch``, ``validate``,
``prune`` and ``convert-checkpoints`` default to every dataset, ``paper`` reads them all. Errors the user can fix (bad parameters, a corrupt or
missing file, a diverged run, a full disk) print one line ``villani: error: …`` and exit
with status 2; ``--traceback`` (or ``VILLANI_TRACEBACK=1``) shows the full trace.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--params", action="append", metavar="FILE",
                   help="parameter file(s), merged in order (default: params.yaml)")
    p.add_argument("--results", default="results", metavar="DIR", help="results folder (default: results)")
    p.add_argument("--dataset", default=None, metavar="NAME",
                   help="the dataset of a document naming several (datasets:); default: its only one")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--traceback", action="store_true", help="show full tracebacks on errors")
    return p


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", default="adamw", choices=["adamw", "noise"], help="run variant")
    p.add_argument("--lam", type=float, required=True, help="weight decay λ of the run")
    p.add_argument("--seed", type=int, required=True, help="seed of the run")


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="villani", description=__doc__.split("\n\n")[0], parents=[common])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    v = sub.add_parser("validate", parents=[common], help="validate parameter files; print the runs, segments and checkpoints they define")
    v.add_argument("--print", action="store_true", help="print the complete parameters with defaults")

    sub.add_parser("fetch", parents=[common], help="download corpus, tokenizer and pretrained model into the "
                   "Hugging Face cache (once, on a machine with internet); every dataset unless --dataset")
    sub.add_parser("pretrained", parents=[common], help="save model.name's config (and for init: pretrained its "
                   "weights) into results/pretrained/<dataset>/, from the Hugging Face cache")
    sub.add_parser("tokenize", parents=[common], help="read the corpus, train/load the tokenizer, write token blocks")

    t = sub.add_parser("train", parents=[common], help="train one run up to a checkpoint (one segment) or to the end")
    _run_args(t)
    g = t.add_mutually_exclusive_group(required=True)
    g.add_argument("--until", type=int, help="segment end step (must be a segment end)")
    g.add_argument("--all", action="store_true", help="run every segment that is not complete yet")

    m = sub.add_parser("measure", parents=[common], help="curvature measurement of one checkpoint (or all of a run)")
    _run_args(m)
    gm = m.add_mutually_exclusive_group(required=True)
    gm.add_argument("--step", type=int, help="checkpoint step")
    gm.add_argument("--all", action="store_true", help="every checkpoint of the run")

    sub.add_parser("rays", parents=[common], help="Ψ_s along radial rays (Fig 2)")
    la = sub.add_parser("landscape", parents=[common], help="2-D loss surface (Fig 3)")
    la.add_argument("--lam", type=float, required=True, help="λ of F on the surface")
    sub.add_parser("bounds", parents=[common], help="bounds table of the paper's section V")
    sub.add_parser("cost", parents=[common], help="HVP seconds and peak memory vs model size (Fig 10)")
    sub.add_parser("figures", parents=[common], help="render every figure and table")
    sub.add_parser("metrics", parents=[common], help="write results/metrics/<dataset>.json (headline numbers)")
    sub.add_parser("paper", parents=[common], help="render the cross-dataset figures and tables of every dataset "
                   "(results/figures/paper/, results/tables/paper/)")
    pr = sub.add_parser("prune", parents=[common], help="delete weights of measured checkpoints no stage still needs")
    pr.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    sub.add_parser("convert-checkpoints", parents=[common], help="rewrite checkpoints of the old flat layout "
                   "(ckpt/step<t>.safetensors) as Hugging Face folders ckpt/step<t>/")
    return parser


def _document(args) -> dict:
    from villani.plan.config import load_params

    return load_params(args.params or ["params.yaml"])


def _datasets(args, doc: dict, *, every: bool) -> list[str]:
    """``--dataset``; without it the document's only dataset, or with ``every`` all of them."""
    from villani.plan.config import ParamsError, dataset_names

    names = dataset_names(doc)
    if args.dataset is not None:
        if args.dataset not in names:
            raise ParamsError(f"--dataset: {args.dataset!r} is not in the parameters (datasets: {', '.join(names)})")
        return [args.dataset]
    if len(names) > 1 and not every:
        raise ParamsError(f"--dataset: required, the parameters name several datasets ({', '.join(names)}); the DVC "
                          "mirror runs one dataset per parameter file (docs/ARCHITECTURE.md)")
    return names


def _params(args) -> dict:
    """The parameters of the one dataset this command works on."""
    from villani.plan.config import dataset_params

    doc = _document(args)
    return dataset_params(doc, _datasets(args, doc, every=False)[0])


def _every_params(args) -> list[dict]:
    """The parameters of ``--dataset``, or of every dataset of the document."""
    from villani.plan.config import dataset_params

    doc = _document(args)
    return [dataset_params(doc, name) for name in _datasets(args, doc, every=True)]


def cmd_validate(args) -> None:
    import json

    from villani.io.results import data_stats
    from villani.plan import layout
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps, segment_ends

    for p in _every_params(args):
        rs = list(runs(p))
        print(f"ok: {p['data']['name']}: {len(rs)} runs, {len(segment_ends(p['train']))} segments and "
              f"{len(checkpoint_steps(p['train']))} checkpoints per run")
        if layout.fmt(layout.DATA_STATS, args.results, dataset=p["data"]["name"]).exists():
            blocks = data_stats(p, args.results)["splits"]["train"]["blocks"]
            t = p["train"]
            print(f"  train.steps = {t['steps']} covers {t['steps'] * t['batch_size'] / blocks:.2f} epochs "
                  f"of {blocks} train blocks (batch {t['batch_size']})")
        if args.print:
            print(json.dumps(p, indent=2))


def cmd_fetch(args) -> None:
    from villani.data.fetch import describe, fetch, write_record
    from villani.plan import layout

    ps = _every_params(args)
    for p in ps:
        record = fetch(p)
        out = layout.fmt(layout.FETCH_RECORD, args.results, dataset=p["data"]["name"])
        write_record(record, out)
        head = [f"dataset {p['data']['name']}:"] if len(ps) > 1 else []
        print("\n".join(head + describe(record) + [f"wrote {out}"]))


def cmd_pretrained(args) -> None:
    from villani.model import write_pretrained
    from villani.plan import layout

    p = _params(args)
    record = write_pretrained(p, args.results)
    out = layout.fmt(layout.PRETRAINED_DIR, args.results, dataset=p["data"]["name"])
    what = "config and weights" if record["weights_sha256"] else "config"
    print(f"wrote {out}: {record['name']} ({what})")


def cmd_tokenize(args) -> None:
    from villani.data import tokenize
    from villani.plan import layout

    p = _params(args)
    out = layout.fmt(layout.DATA_DIR, args.results, dataset=p["data"]["name"])
    stats = tokenize(p["data"], out)
    print(f"wrote {out}: " + ", ".join(f"{s} {stats['splits'][s]['blocks']} blocks" for s in stats["splits"]))


def cmd_train(args) -> None:
    from villani.plan.schedule import segment_ends
    from villani.training import train_segment

    p = _params(args)
    _check_run(p, args)
    ends = segment_ends(p["train"]) if args.all else [args.until]
    for end in ends:
        if args.all and _segment_done(p, args, end):
            continue
        m = train_segment(p, variant=args.variant, lam=args.lam, seed=args.seed, end=end, root=args.results,
                          device=args.device)
        print(f"segment {m['start']}→{m['end']}: checkpoints {[c['step'] for c in m['checkpoints']]}")


def _segment_done(p, args, end) -> bool:
    from villani.plan import layout

    return layout.fmt(layout.SEGMENT, args.results, dataset=p["data"]["name"], variant=args.variant,
                      lam=args.lam, seed=args.seed, step=end).exists()


def _check_run(p, args) -> None:
    from villani.plan.config import ParamsError

    lams = p["train"]["lambdas"] if args.variant == "adamw" else p["train"]["noise"]["lambdas"]
    key = "train.lambdas" if args.variant == "adamw" else "train.noise.lambdas"
    if args.lam not in [float(x) for x in lams]:
        raise ParamsError(f"--lam: {args.lam:g} is not in {key} = {lams}")
    if args.seed not in p["train"]["seeds"]:
        raise ParamsError(f"--seed: {args.seed} is not in train.seeds = {p['train']['seeds']}")


def cmd_measure(args) -> None:
    from villani.measure import measure_checkpoint
    from villani.plan.schedule import checkpoint_steps

    p = _params(args)
    _check_run(p, args)
    steps = checkpoint_steps(p["train"]) if args.all else [args.step]
    for step in steps:
        out = measure_checkpoint(p, variant=args.variant, lam=args.lam, seed=args.seed, step=step,
                                 root=args.results, device=args.device)
        print(f"measured step {step}: {out}")


def cmd_rays(args) -> None:
    from villani.measure.rays import run_rays

    print(run_rays(_params(args), root=args.results, device=args.device))


def cmd_landscape(args) -> None:
    from villani.measure.landscape import run_landscape

    print(run_landscape(_params(args), lam=args.lam, root=args.results, device=args.device))


def cmd_bounds(args) -> None:
    from villani.bounds.table import write_bounds

    print(write_bounds(_params(args), root=args.results))


def cmd_cost(args) -> None:
    from villani.measure.hvp_cost import run_hvp_cost

    print(run_hvp_cost(_params(args), root=args.results, device=args.device))


def cmd_figures(args) -> None:
    from villani.figures import render_all

    for path in render_all(_params(args), root=args.results):
        print(path)


def cmd_metrics(args) -> None:
    from villani.figures.metrics import write_metrics

    print(write_metrics(_params(args), root=args.results))


def cmd_paper(args) -> None:
    from villani.figures.paper import render_paper

    for path in render_paper(_document(args), root=args.results):
        print(path)


def cmd_prune(args) -> None:
    from villani.dag.prune import prune

    verb = "would free" if args.dry_run else "freed"
    for p in _every_params(args):
        files, freed = prune(p, root=args.results, dry_run=args.dry_run)
        print(f"{p['data']['name']}: {len(files)} checkpoint files, {verb} {freed / 1e6:.1f} MB")


def cmd_convert_checkpoints(args) -> None:
    from villani.plan import layout
    from villani.plan.runs import runs
    from villani.training.checkpoint import convert_run

    for p in _every_params(args):
        for run in runs(p):
            steps = convert_run(p, args.results, run)
            if steps:
                print(f"{run.path(layout.RUN_DIR, args.results)}: converted {len(steps)} checkpoints")


COMMANDS = {
    "validate": cmd_validate, "fetch": cmd_fetch, "pretrained": cmd_pretrained, "tokenize": cmd_tokenize,
    "train": cmd_train, "measure": cmd_measure, "rays": cmd_rays, "landscape": cmd_landscape, "bounds": cmd_bounds,
    "cost": cmd_cost, "figures": cmd_figures, "metrics": cmd_metrics, "paper": cmd_paper, "prune": cmd_prune,
    "convert-checkpoints": cmd_convert_checkpoints,
}


def _one_line(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return f"{e.filename or 'disk'}: no space left on device; earlier results are intact (writes are atomic)"
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror}"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from villani.plan.config import ParamsError
    from villani.training import TrainingDiverged

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        COMMANDS[args.command](args)
    except (ParamsError, TrainingDiverged, ValueError, OSError) as e:
        if args.traceback or os.environ.get("VILLANI_TRACEBACK"):
            raise
        print(f"villani: error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
