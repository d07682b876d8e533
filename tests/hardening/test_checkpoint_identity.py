"""A checkpoint folder is a Hugging Face folder a user can pick up (issue 22 item 5), and it
cannot lie about itself (issue 25): its step, λ, seed, variant checked against its path,
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

from tests.conftest import tiny_params
from villani.cli import main
from villani.plan import layout
from villani.plan.config import dump_yaml
from villani.plan.runs import Run
from villani.plan.schedule import segment_ends
from villani.training import train_segment
from villani.training.checkpoint import read_meta

RUN = Run("tiny", "adamw", 0.01, 0)
SENTENCE = "Return the sum of x and y, or None if either is missing."


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_data_root):
    p = tiny_params()
    base = tmp_path_factory.mktemp("identity")
    root = base / "results"
    shutil.copytree(tiny_data_root / "data", root / "data")
    for end in segment_ends(p["train"]):
        train_segment(p, end=end, root=root, device="cpu", progress=False, variant="adamw", lam=0.01, seed=0)
    params = base / "p.yaml"
    dump_yaml(p, params)
    return p, params, root


@pytest.fixture()
def copy(trained, tmp_path):
    p, params, root = trained
    dest = tmp_path / "results"
    shutil.copytree(root, dest)
    return p, params, dest


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
    assert f"delete {seg} and run `villani train --variant adamw --lam 0.01 --seed 0 --until 12`" in err


def test_a_deleted_checkpoint_says_which_segment_to_retrain(copy, capsys):
    _, params, root = copy
    shutil.rmtree(RUN.path(layout.CKPT_DIR, root, step=18))
    rc, err = _measure(params, root, 18, capsys)
    assert rc == 2 and "\n" not in err, err
    assert "checkpoint not found; retrain its segment: delete" in err and "--until 24`" in err


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
