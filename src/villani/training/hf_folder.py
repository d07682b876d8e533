"""What makes a checkpoint folder usable by a Hugging Face user as it is: the pipeline's
tokenizer and a model card, beside the weights and config.

- :func:`save_tokenizer`: the run's dataset tokenizer (``results/data/<dataset>``, EOS and
  ``model_max_length = data.seq_len`` from its ``stats.json``) saved with
  ``save_pretrained`` — ``tokenizer.json`` and ``tokenizer_config.json``, each written
  atomically — so ``AutoTokenizer.from_pretrained(ckpt)`` gives the tokenizer the model was
  trained with (a sentence round-trips through it);
- :func:`write_model_card`: ``README.md`` (``huggingface_hub.ModelCard``, its metadata from
  ``ModelCardData``) with the run's identity (dataset, variant, λ,
  seed, step, tokens seen, params digest), its training loss and its validation
  perplexity once ``villani measure`` has measured it, and how to load the folder.

The card is not covered by ``checkpoint.json``'s hashes (it is refreshed when the
checkpoint is measured); the tokenizer files are (``tokenizer_sha256``,
``tokenizer_config_sha256``).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Mapping

from villani.io import atomic
from villani.plan import layout
from villani.plan.writers import how_to_rewrite

__all__ = ["TOKENIZER_FILES", "CARD_FILE", "save_tokenizer", "write_model_card", "model_card"]

# file name in the checkpoint folder → the checkpoint.json key of its sha256
TOKENIZER_FILES = {"tokenizer.json": "tokenizer_sha256", "tokenizer_config.json": "tokenizer_config_sha256"}
CARD_FILE = "README.md"


@functools.lru_cache(maxsize=4)
def _tokenizer_bytes(data_dir: str, mtime_ns: int) -> dict[str, bytes]:
    """The files ``save_pretrained`` writes for the tokenizer of a data folder (cached per
    version of its tokenizer.json: every checkpoint of a run gets the same bytes)."""
    from villani.data.tokenizer import load_tokenizer

    tok = load_tokenizer(data_dir)
    with tempfile.TemporaryDirectory(prefix="villani-tokenizer-") as tmp:
        tok.save_pretrained(tmp)
        return {name: (Path(tmp) / name).read_bytes() for name in TOKENIZER_FILES}


def save_tokenizer(root, dataset: str, ckpt_dir: Path) -> dict[str, str]:
    """Write the dataset's tokenizer into ``ckpt_dir``; return {checkpoint.json key: sha256}."""
    data_dir = layout.fmt(layout.DATA_DIR, root, dataset=dataset)
    source = data_dir / "tokenizer.json"
    if not source.is_file():
        raise ValueError(f"{source}: tokenizer file not found ({how_to_rewrite(source, missing=True)} first); a "
                         "checkpoint folder carries its dataset's tokenizer")
    files = _tokenizer_bytes(str(data_dir), source.stat().st_mtime_ns)
    out = {}
    for name, key in TOKENIZER_FILES.items():
        atomic.write_bytes(ckpt_dir / name, files[name])
        out[key] = atomic.sha256_file(ckpt_dir / name)
    return out


def _fmt(value, spec: str = ".4g") -> str:
    return "—" if value is None else format(value, spec) if isinstance(value, (int, float)) else str(value)


def model_card(meta: Mapping, *, val_ppl: float | None = None, measure_json: str | None = None) -> str:
    """The README.md of a checkpoint folder from its ``checkpoint.json`` (``meta``)."""
    lam = layout.format_lam(meta["lam"]) if meta.get("lam") is not None else "—"
    ppl = (_fmt(val_ppl) + f" (`villani measure`, {measure_json})" if val_ppl is not None
           else f"not measured yet (`villani measure` writes `val_ppl` to {measure_json or 'its measure JSON'})")
    rows = [("dataset", meta.get("dataset")), ("variant (update rule)", meta.get("variant")),
            ("weight decay λ", lam), ("seed", meta.get("seed")), ("step", meta.get("step")),
            ("tokens seen", meta.get("tokens_seen")), ("parameters d", meta.get("d")),
            ("params digest (villani.plan.digest.run_digest)", meta.get("digest")),
            ("training loss (mean since the previous checkpoint)", _fmt(meta.get("train_loss"))),
            ("validation perplexity", ppl), ("precision", meta.get("precision"))]
    from huggingface_hub import ModelCard, ModelCardData

    table = "\n".join(f"| {k} | {_fmt(v, '')} |" for k, v in rows)
    data = ModelCardData(library_name="transformers", pipeline_tag="text-generation",
                         tags=["villani", "weight-decay", "hessian-curvature"])
    return str(ModelCard(f"""---
{data.to_yaml()}
---

# {meta.get('dataset')} · {meta.get('variant')} · λ = {lam} · seed {meta.get('seed')} · step {meta.get('step')}

A checkpoint of a `villani` training run (a small causal LM trained with weight decay λ
to measure the Hessian curvature of its loss). `checkpoint.json` holds the full record
(the training parameters, the sha256 of every other file of this folder but this card).

| | |
|---|---|
{table}

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
model = AutoModelForCausalLM.from_pretrained("path/to/this/folder")
ids = tokenizer("def main(", return_tensors="pt").input_ids
print(tokenizer.decode(model.generate(ids, max_new_tokens=20, do_sample=False)[0]))
batch = tokenizer(["def main(", "import"], padding=True, return_tensors="pt")  # pads with EOS
```
"""))


def write_model_card(ckpt_dir: Path, meta: Mapping, measure_path: Path | None = None) -> Path:
    """Write (or refresh) the card of ``ckpt_dir``; the validation perplexity is read from
    ``measure_path`` when that file exists and holds it."""
    val_ppl, rel = None, None
    if measure_path is not None:
        rel = str(Path("..", "..", *Path(measure_path).parts[-2:]))
        if Path(measure_path).is_file():
            val_ppl = atomic.read_json(measure_path, "measure JSON").get("val_ppl")
    path = Path(ckpt_dir) / CARD_FILE
    atomic.write_text(path, model_card(meta, val_ppl=val_ppl, measure_json=rel))
    return path
