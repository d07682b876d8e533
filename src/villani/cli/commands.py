"""The stage commands of ``villani``: one ``cmd_<command>(args)`` per subcommand (rule name =
command name; ``diagnose`` is :mod:`villani.cli.diagnose`), each a thin call into the package
of its stage, imported when the command runs; and the parameters a command works on — the
document of ``--params`` and its dataset (``--dataset``, or the only one, or every one).

The parser, the table from name to command (:data:`villani.cli.COMMANDS`) and the error
policy are :mod:`villani.cli`.
"""

from __future__ import annotations


# --------------------------------------------------------------------------- the parameters of a command
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


# --------------------------------------------------------------------------- the commands
def cmd_validate(args) -> None:
    import json

    from villani.io.results import current_stats
    from villani.plan import layout
    from villani.plan.config import ParamsError
    from villani.plan.writers import command
    from villani.plan.runs import runs
    from villani.plan.schedule import checkpoint_steps, segment_ends

    for p in _every_params(args):
        stats, stale = current_stats(p, args.results)
        blocks = None if stats is None else int(stats["splits"]["train"]["blocks"])
        if blocks is not None and p.measure.blocks > blocks:
            raise ParamsError(f"measure.blocks: {p['measure']['blocks']} is invalid (≤ {blocks}, the blocks of the "
                              f"train split in {args.results}/data/{p['data']['name']}/stats.json)")
        _check_positions(p, args.results)
        _check_architecture(p)
        rs = list(runs(p))
        print(f"ok: {p['data']['name']}: {len(rs)} runs, {len(segment_ends(p['train']))} segments and "
              f"{len(checkpoint_steps(p['train']))} checkpoints per run")
        t = p["train"]
        print(f"  train.steps = {t['steps']} covers {t['steps'] * t['batch_size'] / blocks:.2f} epochs "
              f"of {blocks} train blocks (batch {t['batch_size']})" if blocks else
              f"  the split sizes are not known ({stale}): "
              f"`{command(layout.fmt(layout.DATA_STATS, args.results, dataset=p['data']['name']))}` writes them; "
              "measure.blocks is checked against the train split then")
        if args.print:
            print(json.dumps(p, indent=2))


def _check_positions(p, root) -> None:
    """data.seq_len against model.name's positions, where the pretrained stage saved its
    config (the parameter check knows them only when model.config gives them)."""
    import json

    from villani.plan import layout
    from villani.plan.config import ParamsError

    config = layout.fmt(layout.PRETRAINED_CONFIG, root, dataset=p["data"]["name"])
    if not p["model"]["name"] or not config.is_file():
        return
    try:
        positions = json.loads(config.read_text()).get("max_position_embeddings")
    except (OSError, ValueError):
        return  # the train stage reads it with its own checks
    if isinstance(positions, int) and p["data"]["seq_len"] > positions:
        raise ParamsError(f"data.seq_len: {p['data']['seq_len']} is invalid (≤ {positions}, max_position_embeddings "
                          f"of model.name {p['model']['name']} in {config})")


def _check_architecture(p) -> None:
    """Build the model of ``model.config`` on the meta device (no memory, no weights), so that
    every check its config and model classes make runs before any job: one line naming
    ``model.config`` where one refuses it (the parameter check names the key of the shapes it
    knows, :func:`villani.plan.families.shape_problem`). A named model (``model.name``) is checked
    when the pretrained stage reads its config."""
    import torch

    from villani.model.causal_lm import build_model

    if p["model"]["name"]:
        return
    vocab = p.data.tokenizer.vocab_size or 256  # any size builds the same shapes
    try:
        with torch.device("meta"):
            build_model(p.model, vocab, p.data.seq_len, seed=0)
    except (ValueError, TypeError, NotImplementedError, RuntimeError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        if first.startswith(("model.config", "data.seq_len")):  # the model's own one-line checks
            raise
        family = p["model"]["config"].get("model_type", "gpt_neo")
        raise ValueError(f"model.config: not a valid {family} model ({first})") from None


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
    from villani.model.causal_lm import write_pretrained
    from villani.plan import layout

    p = _params(args)
    record = write_pretrained(p, args.results)
    out = layout.fmt(layout.PRETRAINED_DIR, args.results, dataset=p["data"]["name"])
    what = "config and weights" if record["weights_sha256"] else "config"
    print(f"wrote {out}: {record['name']} ({what})")


def cmd_plan(args) -> None:
    from villani.dag.plan_stage import write_plan

    path, retired, restored = write_plan(_params(args), root=args.results)
    moves = [f"retired {d}" for d in retired] + [f"restored {d}" for d in restored]
    print("\n".join([*moves, f"wrote {path}"]))


def cmd_tokenize(args) -> None:
    from villani.data import tokenize
    from villani.plan import layout

    p = _params(args)
    out = layout.fmt(layout.DATA_DIR, args.results, dataset=p["data"]["name"])
    stats = tokenize(p["data"], out)
    print(f"wrote {out}: " + ", ".join(f"{s} {stats['splits'][s]['blocks']} blocks" for s in stats["splits"]))


def cmd_train(args) -> None:
    from villani.training import train_run, train_segment

    p = _params(args)
    seeds = args.seed
    _check_run(p, args, seeds)
    if len(seeds) > 1 or args.per_device > 1:
        from villani.training.side_by_side import train_side_by_side

        train_side_by_side(args, seeds)  # one `villani train` of one seed per process: the lines below
        return
    run = dict(variant=args.variant, lam=args.lam, seed=seeds[0], root=args.results, device=args.device)
    done = train_run(p, **run) if args.all else [(train_segment(p, end=args.until, **run), "asked")]
    for m, why in done:
        verb = "trained" if why else "done under these parameters"
        print(f"segment {m['start']}→{m['end']}: {verb}; checkpoints {[c['step'] for c in m['checkpoints']]}")


def _check_run(p, args, seeds: list[int] | None = None) -> None:
    """``--variant``, ``--lam`` and ``--seed`` (or each of ``seeds``) name a run of ``p``."""
    from villani.plan.config import ParamsError

    from villani.plan.runs import variant_kind, variant_lambdas, variants

    if args.variant not in variants(p):
        raise ParamsError(f"--variant: {args.variant!r} is not a variant of these parameters "
                          f"(variants: {', '.join(variants(p))})")
    lams = variant_lambdas(p, args.variant)
    kind = variant_kind(args.variant)
    key = "train.lambdas" if kind == "adamw" else f"train.{kind}.lambdas"
    if args.lam not in lams:
        raise ParamsError(f"--lam: {args.lam:g} is not in {key} = {lams}")
    for seed in seeds if seeds is not None else [args.seed]:
        if seed not in p["train"]["seeds"]:
            raise ParamsError(f"--seed: {seed} is not in train.seeds = {p['train']['seeds']}")
    if seeds is not None and len(set(seeds)) < len(seeds):
        raise ParamsError(f"--seed: {seeds} names a seed twice (one process per run)")


def cmd_measure(args) -> None:
    from villani.measure import measure_checkpoint
    from villani.plan.schedule import measured_steps

    p = _params(args)
    _check_run(p, args)
    steps = measured_steps(p, args.variant) if args.all else [args.step]
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


def cmd_claims(args) -> None:
    from villani.claims.reporting.ledger import write_claims

    print(write_claims(_params(args), root=args.results))


def _design_params(args, path: str) -> dict:
    """The parameters of a further design (``--sensitivity FILE``): FILE over ``--params``, as
    ``snakemake --configfile FILE`` reads it over params.yaml; one dataset."""
    from villani.plan.config import ParamsError, dataset_names, dataset_params, load_params

    if str(path).endswith(".json"):
        raise ParamsError(f"--sensitivity {path}: a ledger; give the other design's parameter file (e.g. "
                          "configs/strong.yaml): its chain of designs is computed from the results")
    doc = load_params([*(args.params or ["params.yaml"]), path])
    names = dataset_names(doc)
    if len(names) != 1:
        raise ParamsError(f"--sensitivity {path}: names {len(names)} datasets ({', '.join(names)}); give the file "
                          "of one design")
    return dataset_params(doc, names[0])


def cmd_claims_report(args) -> None:
    from villani.claims.reporting.design import chain_doc
    from villani.claims.reporting.results_page import load, report, write_report
    from villani.claims.reporting.errors_page import wrong
    from villani.io.results import claims_ledger
    from villani.plan import layout

    p = _params(args)
    if args.ledger is None:  # the run's own ledger: also checked against the measurements it names
        claims_ledger(p, args.results)
    path = args.ledger or layout.fmt(layout.CLAIMS_JSON, args.results, dataset=p["data"]["name"])
    main, others, chains = load(path), [], []
    for f in args.sensitivity:  # each further design: its ledger (checked) and the chain of designs to it
        q = _design_params(args, f)
        claims_ledger(q, args.results)
        others.append(load(layout.fmt(layout.CLAIMS_JSON, args.results, dataset=q["data"]["name"])))
        chains.append(chain_doc(p, q, args.results, main_name=" + ".join(args.params or ["params.yaml"]),
                                other_name=f))
    print(write_report(args.write, main, others, chains) if args.write
          else report(main, others, chains) + "\n" + wrong(main, others), end="\n")


def cmd_metrics(args) -> None:
    from villani.tracking.dvc_plots import write_plots
    from villani.tracking.metrics import write_metrics

    p = _params(args)
    print(write_metrics(p, root=args.results))
    print("\n".join(write_plots(p, root=args.results)))


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


def cmd_run_lock(args) -> None:
    from villani.dag.run_lock import run_locked

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    rc = run_locked(cmd, root=args.results, brief=args.brief)
    if rc:
        raise SystemExit(rc)


def cmd_profile(args) -> None:
    from villani.dag.profiles import install_profile

    used, path = install_profile(args.source, args.name, account=args.account, partition=args.partition,
                                 gpu_partition=args.gpu_partition)
    taken = "" if used == args.name else f" ({args.name!r} exists and was left alone)"
    print(f"installed profile {used!r}{taken}: {path}\nuse: snakemake --profile {used}")


def cmd_dvc_yaml(args) -> None:
    from pathlib import Path

    from villani.dag import dvc_yaml

    if args.check:
        problems = dvc_yaml.check(args.output, args.params or ["params.yaml"])
        if problems:
            raise ValueError("; ".join(problems))
        print(f"ok: {args.output} is current; {', '.join(args.params or ['params.yaml'])}: every key it reads is set")
        return
    Path(args.output).write_text(dvc_yaml.render())
    print(f"wrote {args.output} ({len(dvc_yaml.stages())} stages)")


def cmd_docs(args, parser) -> None:
    from villani.cli import reference

    if args.check:
        stale = reference.stale_pages(parser)
        if stale:
            raise ValueError(f"not current: {', '.join(stale)} (run `villani docs` to regenerate them)")
        print(f"ok: the {len(reference.PAGES) + len(reference.MARKED())} generated pages are current")
        return
    changed = reference.write_pages(parser)
    print(f"wrote {', '.join(changed) if changed else 'nothing new'} "
          f"({len(reference.PAGES) + len(reference.MARKED())} generated pages)")
