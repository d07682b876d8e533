"""A checkpoint folder is a Hugging Face folder a user can pick up, and it
cannot lie about itself: its step, λ, seed, variant checked against its path,
checkpoint.json against the hash its segment manifest recorded; a lost or pruned file is
one line saying how to get it back.

One tiny run (24 steps, checkpoints 0, 6, 12, 18, 24, two segments), trained once per
module; each test damages its own copy.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from villani.cli import main
from villani.plan import layout
from villani.plan.runs import Run
from villani.training.checkpoint import read_meta

RUN = Run("tiny", "adamw", 0.01, 0)
SENTENCE = "Return the sum of x and y, or None if either is missing."


def _measure(params, root, step, capsys) -> tuple[int, str]:
    rc = main(["measure", "--params", str(params), "--results", str(root), "--lam", "0.01", "--seed", "0",
               "--step", str(step), "--device", "cpu", "--log-level", "WARNING"])
    return rc, capsys.readouterr().err.strip()


def test_a_checkpoint_folder_opens_with_auto_classes_and_generates(trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from villani.data.tokenizer import load_tokenizer

    p, _, root = trained
    folder = RUN.path(layout.CKPT_DIR, root, step=24)
    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(SENTENCE)["input_ids"]
    assert tok.decode(ids) == SENTENCE and len(set(ids)) > 10
    assert ids == load_tokenizer(layout.fmt(layout.DATA_DIR, root, dataset="tiny"))(SENTENCE)["input_ids"]
    assert tok.eos_token == "<|endoftext|>"
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    assert len(tok) == model.get_input_embeddings().num_embeddings
    prompt = tok("def main(", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)
    assert out.shape[1] > prompt.shape[1] and isinstance(tok.decode(out[0]), str)
    batch = tok(["def", "def main(x):"], padding=True, return_tensors="pt")  # pads with EOS
    assert tok.pad_token == tok.eos_token and batch.input_ids.shape[0] == 2
    assert batch.attention_mask[0].sum() < batch.attention_mask[1].sum() == batch.input_ids.shape[1]
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert logits.shape[:2] == batch.input_ids.shape


def test_the_model_card_names_the_run(trained):
    _, _, root = trained
    meta = read_meta(root, step=12, **RUN.wildcards)
    card = (RUN.path(layout.CKPT_DIR, root, step=12) / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\n")
    for field in ("| dataset | tiny |", "| variant (update rule) | adamw |", "| weight decay λ | 0.01 |",
                  "| seed | 0 |", "| step | 12 |", f"{meta['digest']}", "../../measure/step0000012.json"):
        assert field in card, field


def test_a_folder_copied_over_another_step_is_one_line_naming_both(copy, capsys):
    _, params, root = copy
    src, dst = (RUN.path(layout.CKPT_DIR, root, step=s) for s in (18, 6))
    shutil.rmtree(dst)
    shutil.copytree(src, dst)
    rc, err = _measure(params, root, 6, capsys)
    assert rc == 2 and "\n" not in err, err
    assert "step 18 in checkpoint.json, but 6 from its path" in err and str(dst / "checkpoint.json") in err
    assert not RUN.path(layout.MEASURE_JSON, root, step=6).exists()


def test_an_edited_checkpoint_json_is_refused_against_its_manifest(copy, capsys):
    _, params, root = copy
    meta_path = RUN.path(layout.CKPT_META, root, step=12)
    meta = json.loads(meta_path.read_text())
    meta["train_loss"] = 0.5
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    rc, err = _measure(params, root, 12, capsys)
    seg = RUN.path(layout.SEGMENT, root, step=12)
    assert rc == 2 and "\n" not in err, err
    assert f"{meta_path}: sha256 does not match the one {seg} recorded" in err
    assert "retrain its segment: `villani train --params " in err
    assert "--dataset tiny --variant adamw --lam 0.01 --seed 0 --until 12`" in err


def test_a_deleted_checkpoint_says_which_segment_to_retrain(copy, capsys):
    _, params, root = copy
    shutil.rmtree(RUN.path(layout.CKPT_DIR, root, step=18))
    rc, err = _measure(params, root, 18, capsys)
    assert rc == 2 and "\n" not in err, err
    assert "checkpoint not found; retrain its segment: `villani train" in err and "--until 24`" in err


def test_a_pruned_checkpoint_says_it_was_pruned_and_how_to_retrain(copy, capsys):
    _, params, root = copy
    assert _measure(params, root, 6, capsys)[0] == 0
    assert main(["prune", "--params", str(params), "--results", str(root)]) == 0
    capsys.readouterr()
    weights = RUN.path(layout.CKPT_WEIGHTS, root, step=6)
    assert not weights.exists()
    rc, err = _measure(params, root, 6, capsys)
    assert rc == 2 and "\n" not in err, err
    assert f"{weights}: deleted by `villani prune` after step 6 was measured" in err and "--until 12`" in err


def test_a_checkpoint_of_another_lambda_names_both_values(trained):
    from villani.training.provenance import check_trained_under

    p, _, root = trained
    meta = read_meta(root, step=24, **RUN.wildcards)
    other = Run("tiny", "adamw", 0.0, 0)
    with pytest.raises(ValueError) as e:
        check_trained_under(p, other, meta, "ckpt.json")
    assert "λ: 0.01 there, 0.0 here" in str(e.value) and "null" not in str(e.value)


# --------------------------------------------------------------------------- diagnose on a pipeline checkpoint
def _diagnose(capsys, folder, out, *extra) -> tuple[int, str, str]:
    rc = main(["diagnose", "--model", str(folder), "--data", "builtin:pydoc", "--seq-len", "32", "--blocks", "2",
               "--probes", "4", "--top-k", "2", "--lanczos-steps", "3", "--device", "cpu", "--out", str(out), *extra])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err.strip()


@pytest.mark.parametrize("tokenizer", [None, "data"])
def test_diagnose_measures_a_pipeline_checkpoint_with_its_own_tokenizer(trained, tmp_path, capsys, tokenizer):
    """The checkpoint folder alone, or with the pipeline's tokenizer folder results/data/<dataset>
    (accepted: its EOS comes from stats.json): real tokens, the same numbers either way."""
    _, _, root = trained
    extra = ["--tokenizer", str(layout.fmt(layout.DATA_DIR, root, dataset="tiny"))] if tokenizer else []
    rc, out, err = _diagnose(capsys, RUN.path(layout.CKPT_DIR, root, step=24), tmp_path, *extra,
                             "--log-level", "INFO", "--progress-interval", "0.001")
    assert rc == 0, err
    rec = json.loads((tmp_path / "diagnosis.json").read_text())
    assert rec["data"]["distinct_tokens"] > 100 and rec["data"]["num_tokens"] == 2 * 31
    assert 0 < rec["loss"] < 6.0  # a trained model on its own tokens (ln 300 = 5.7 at chance)
    assert " INFO villani.measure.diagnose: diagnose step0000024 | hutchinson | HVP " in err  # progress lines


def test_diagnose_refuses_a_tokenizer_that_does_not_fit(trained, tmp_path, capsys):
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    _, _, root = trained
    folder = RUN.path(layout.CKPT_DIR, root, step=24)
    foreign = tmp_path / "foreign"
    t = Tokenizer(models.WordLevel({"<eos>": 0, "[UNK]": 1, "the": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<eos>").save_pretrained(foreign)
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o", "--tokenizer", str(foreign))
    assert rc == 2 and "\n" not in err, err
    assert f"--tokenizer: tokenizer '{foreign}' has 3 tokens but model '{folder}' embeds 300" in err
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o", "--min-distinct-tokens", "100000")
    assert rc == 2 and "\n" not in err, err
    assert "distinct tokens, fewer than --min-distinct-tokens 100000" in err and "builtin:pydoc" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv, named", [
    (["--probes", "100000000"], "--probes: 100000000 is invalid (an integer ≥ 2 and ≤ 100,000)"),
    (["--set-seed", "-1"], "--set-seed: -1 is invalid (an integer ≥ 0)"),
    (["--blocks", "0"], "--blocks: 0 is invalid"),
    (["--s-values", "nan"], "--s-values/--s: nan is invalid (a finite number > 0)"),
    (["--device", "foo"], "--device: 'foo' is not a torch device"),
])
def test_diagnose_options_are_bounded_one_line(trained, tmp_path, capsys, argv, named):
    _, _, root = trained
    rc, _, err = _diagnose(capsys, RUN.path(layout.CKPT_DIR, root, step=24), tmp_path / "o", *argv)
    assert rc == 2 and err.startswith(f"villani: error: {named}") and "\n" not in err, err


def test_diagnose_of_a_truncated_safetensors_is_one_line(trained, tmp_path, capsys):
    """A checkpoint folder (checkpoint.json there): the weights' sha256 names the file; a plain
    Hugging Face folder (no checkpoint.json): the safetensors reader's refusal, in one line."""
    _, _, root = trained
    folder = tmp_path / "ckpt"
    shutil.copytree(RUN.path(layout.CKPT_DIR, root, step=24), folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o")
    assert rc == 2 and "\n" not in err, err
    assert f"{weights}: sha256 does not match {folder / 'checkpoint.json'}" in err
    (folder / "checkpoint.json").unlink()
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o")
    assert rc == 2 and "\n" not in err, err
    assert f"--model: '{folder}': model.safetensors is truncated or corrupt" in err


def test_a_key_added_since_training_reads_not_set_there(trained):
    """A checkpoint written before a parameter existed (here model.revision):
    the line says the key was not set there, not `null there, null here`."""
    from villani.training.provenance import check_trained_under

    p, _, root = trained
    meta = read_meta(root, step=24, **RUN.wildcards)
    meta = dict(meta, digest="older", train_params={k: ({kk: vv for kk, vv in v.items() if kk != "revision"}
                                                        if k == "model" else v)
                                                    for k, v in meta["train_params"].items()})
    with pytest.raises(ValueError) as e:
        check_trained_under(p, RUN, meta, "ckpt.json")
    assert "model.revision: (not set) there, null here" in str(e.value)


def test_diagnose_makes_the_checks_measure_makes_on_a_runs_checkpoint(copy, tmp_path, capsys):
    """One tensor negated in a run's checkpoint (diagnose measured it as L 7.3, tr 1702 — true
    4.5, 595): the weights' sha256 names the file; an edited checkpoint.json: its segment
    manifest names it — before anything is measured."""
    from safetensors.torch import load_file, save

    _, _, root = copy
    folder = RUN.path(layout.CKPT_DIR, root, step=24)
    weights = folder / "model.safetensors"
    original = weights.read_bytes()
    tensors = load_file(weights)
    name = sorted(tensors)[3]
    tensors[name] = -tensors[name]
    weights.write_bytes(save(tensors, metadata={"format": "pt"}))
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o")
    assert rc == 2 and "\n" not in err, err
    assert f"{weights}: sha256 does not match checkpoint.json (corrupt or modified checkpoint)" in err
    weights.write_bytes(original)
    meta = folder / "checkpoint.json"
    meta.write_text(json.dumps(dict(json.loads(meta.read_text()), train_loss=0.5), indent=2))
    rc, _, err = _diagnose(capsys, folder, tmp_path / "o")
    assert rc == 2 and f"{meta}: sha256 does not match the one {RUN.path(layout.SEGMENT, root, step=24)}" in err, err
    assert not (tmp_path / "o").exists()
