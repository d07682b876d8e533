"""The opening text of the Snakemake report, written from the parameters of the run.

Snakemake reads the report's description from an .rst file (the Snakefile's ``report:``
directive) and renders it with Jinja2 (``snakemake.config``, ``files``: the report's
results) and docutils. :func:`description` writes what the run did — model family and
size, datasets, update rules with their λ, seeds, steps, checkpoints, what is measured at
each, where the claims ledger is — as reStructuredText from the resolved parameters;
:func:`write_description` puts it before the fixed part (``workflow.rst``, package data:
where each figure's files lie, linked for every figure of the report) in one file the
``report:`` directive names. The generated text is inside ``{% raw %}`` so that no
parameter value is read as Jinja.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from villani.plan import layout
from villani.plan.config import dataset_names, dataset_params
from villani.plan.runs import DESCRIPTION, is_sweep_arm, runs, variant_kind, variant_lambdas, variant_params, variants
from villani.plan.schedule import checkpoint_steps, spectrum_at

FIXED_PART = Path(__file__).with_name("workflow.rst")  # links to every figure's files (Jinja)
DESCRIPTION_FILE = Path(".snakemake/villani/report-description.rst")  # under the working directory


def _values(xs, most: int = 8) -> str:
    """``{0.0, 0.1, 1.0}``, floats as λ folder names are written
    (:func:`villani.plan.layout.format_lam`); more than ``most`` values as first, second, …, last."""
    words = [layout.format_lam(x) if isinstance(x, float) else str(x) for x in xs]
    return "{" + ", ".join(words if len(words) <= most else [*words[:2], "…", words[-1]]) + "}"


def _shown(path) -> str:
    """A parameter file as the user names it: relative to the working directory when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve())) if p.is_absolute() else str(p)
    except ValueError:
        return str(p)


def model_text(p: Mapping) -> str:
    """The causal LM: family and size (its config), or the named model; how it starts."""
    m, d = p["model"], p["data"]
    start = "pretrained weights" if m["init"] == "pretrained" else "random initialisation"
    if m.get("name"):
        what = f"``{m['name']}`` (its config)"
    else:
        cfg = m["config"]
        size = ", ".join(f"{k} {v}" for k, v in cfg.items() if k != "model_type" and isinstance(v, (int, float)))
        what = f"``{cfg.get('model_type', 'gpt_neo')}`` ({size})"
    tok = d["tokenizer"]
    vocab = (f"tokenizer ``{tok['name']}``" if tok["kind"] == "pretrained"
             else f"{tok['kind']} tokenizer, vocabulary {tok['vocab_size']}")
    return f"{what}, from {start}; {vocab}, sequences of {d['seq_len']} tokens"


def rule_text(p: Mapping, variant: str) -> str:
    """One update rule: what it is, its λ and the settings it trains under."""
    t = variant_params(p, variant)["train"]
    kind = variant_kind(variant)
    extra = {"adamw": f"η = {t['lr']}, {t['warmup_steps']} warm-up steps",
             "adam_l2": f"η = {t['lr']}",
             "adamw_noise": f"gradient noise σ = {t['adamw_noise']['grad_std']}",
             "langevin": f"η = {t['lr']} constant, β = {t['langevin']['beta']}"}[kind]
    name = DESCRIPTION[kind] + ("" if variant == kind else f" [``{variant}``]")
    return f"{name} at λ ∈ {_values(variant_lambdas(p, variant))} ({extra})"


def schedule_text(p: Mapping) -> str:
    """What ``measure.spectrum_every``, ``ds_blocks`` and ``sweep_arms`` leave out ("" when nothing)."""
    m, steps = p["measure"], checkpoint_steps(p["train"])
    parts = []
    every = m["spectrum_every"]
    if every > 1:
        n = sum(spectrum_at(every, s, steps) for s in steps)
        elsewhere = (f"doubly stochastic Hutchinson, {m['probe_block']} probe(s) per group on {m['ds_blocks']} fresh "
                     f"block(s) of {m['blocks']}" if m.get("ds_blocks") else "plain Hutchinson")
        parts.append(f"the eigenvalues and the density at every {every}th checkpoint and the last ({n} per run), "
                     f"elsewhere Ψ_s and the trace only ({elsewhere})")
    if m.get("sweep_arms", "every") == "ends" and any(is_sweep_arm(v) for v in variants(p)):
        parts.append("the lr / warm-up sweep arms at their first and last checkpoint only")
    return "; " + "; ".join(parts) if parts else ""


def dataset_text(p: Mapping) -> str:
    """The bullet list of one dataset's run: data, model, rules, checkpoints, measurements."""
    t, m, ds = p["train"], p["measure"], p["data"]["name"]
    n_runs = len(list(runs(p)))
    steps = checkpoint_steps(t)
    spacing = "listed" if t["checkpoints"].get("steps") else t["checkpoints"]["spacing"]
    rules = "\n\n" + "\n".join(f"  - {rule_text(p, v)}" for v in variants(p)) + "\n"  # a nested list
    ledger = layout.fmt(layout.CLAIMS_CSV, dataset=ds)
    trace = "Hutchinson" if m["trace_estimator"] == "hutchinson" else f"{m['trace_estimator']} Hutchinson"
    return "\n".join([
        f"- **Data**: ``{ds}`` from ``{p['data']['source']}``.",
        f"- **Model**: {model_text(p)}.",
        f"- **Update rules** ({n_runs} runs: each λ × seeds {_values(t['seeds'])}, {t['steps']} steps, "
        f"batches of {t['batch_size']} × {p['data']['seq_len']} tokens, weight decay on "
        f"``{t['decay_params']}`` parameters):{rules}",
        f"- **Checkpoints**: steps {_values(steps)} of every run ({len(steps)} per run, "
        f"{len(steps) * n_runs} in all; {spacing} steps), each measured: Ψ_s at s ∈ "
        f"{_values(m['s_values'])}, tr ∇²L ({trace}, {m['num_probes']} probes), "
        f"the top {m['top_k']} eigenvalues of ∇²F (Lanczos, {m['lanczos_steps']} steps) and the spectral "
        f"density (SLQ, {m['slq_probes']} probe(s) × {m['slq_steps']} steps){schedule_text(p)}.",
        f"- **Bounds** at δ = {p['bounds']['delta']}; **claims ledger**: ``{ledger}`` (and ``.json``), "
        "the section *Claims* of this report.",
    ])


def description(p: Mapping, sources: Sequence[str] = ()) -> str:
    """The report's opening text (reStructuredText) for the resolved parameters ``p``, read
    from the parameter files ``sources`` (each over the ones before it)."""
    src = " + ".join(f"``{_shown(s)}``" for s in sources) or "the parameters given"
    head = (
        "**villani** trains causal language models across weight decay λ, measures at every "
        "checkpoint the Villani diagnostic Ψ_s = −ΔF + ‖∇F‖²/s of F = L + λ/2‖θ‖² (ΔF = tr∇²L + λd, "
        "the trace by Hutchinson's estimator), the top of the Hessian spectrum and its density, "
        "evaluates the bounds of Das & Dutta (2026) and renders the paper's figures and tables "
        f"from those numbers. This run, from {src}:")
    parts = [head]
    names = dataset_names(p)
    for ds in names:
        body = dataset_text(dataset_params(p, ds))
        parts.append(f"*Dataset* ``{ds}``:\n\n{body}" if len(names) > 1 else body)
    return "\n\n".join(parts) + "\n"


def applied_order(configfiles: Sequence, overlays: Sequence = ()) -> list[str]:
    """Snakemake's ``workflow.configfiles`` in the order they apply: the Snakefile's
    ``configfile:`` (params.yaml), then the ``--configfile`` overlays (listed first there)."""
    over = {str(f) for f in overlays}
    return [str(f) for f in configfiles if str(f) not in over] + [str(f) for f in configfiles if str(f) in over]


def write_description(p: Mapping, configfiles: Sequence = (), overlays: Sequence = (),
                      dest: Path = DESCRIPTION_FILE) -> str:
    """Write the report's description file (generated text, then ``workflow.rst``) and return
    its absolute path for the ``report:`` directive (``configfiles``, ``overlays``:
    Snakemake's ``workflow.configfiles`` and ``workflow.overwrite_configfiles``). Unchanged
    text is not rewritten, so the many Snakemake processes of a cluster run that parse the
    Snakefile leave it alone."""
    sources = applied_order(configfiles, overlays)
    # a blank line inside the raw block: Snakemake's Jinja trims the newline after a tag
    fixed = FIXED_PART.read_text(encoding="utf-8")
    text = "{% raw %}" + description(p, sources) + "\n{% endraw %}\n" + fixed
    dest = dest.resolve()
    if not dest.is_file() or dest.read_text(encoding="utf-8") != text:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(dest)
    return str(dest)
