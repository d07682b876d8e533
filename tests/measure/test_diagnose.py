"""``villani diagnose``: Ψ_s(λ) from one measurement.

- the curve equals, at every λ, a direct measurement with the full ``ModelHessian`` of
  F_λ = L + λ/2‖θ‖² on the same probes (float64, tiny GPT-2);
- the sign changes and their intervals on constructed numbers (one crossing, two, none,
  an interval open on one side);
- the command end to end on a tiny GPT-2 saved with ``save_pretrained`` (with its
  tokenizer) and a local text corpus, offline: outputs, their agreement, a bad ``--model``;
- the same command under ``torchrun`` on 2 gloo processes (exact data-parallel products,
  and finite differences on FSDP2 shards) against the single-process numbers.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import villani
from tests.curvature.cases import tiny_gpt2, token_batches
from villani.curvature import ModelHessian, hutchinson
from villani.measure.diagnose import (
    PsiParts,
    default_lam_grid,
    describe_sign_change,
    measure_parts,
    parse_lam_grid,
    psi_of_lambda,
    sign_changes,
)
from villani.diagnostics.psi import grad_F_sq, psi_coefficients, psi_s

LAMS = [0.0, 1e-4, 0.03, 1.0, 250.0]


def test_coefficients_are_psi_s():
    t, g, c, q, d, s = 3.0, 2.0, -0.7, 9.0, 41, 2.0
    a, b, k = psi_coefficients(t, g, c, q, d, s)
    for lam in (0.0, 0.5, 7.0):
        assert grad_F_sq(g, c, q, lam) == pytest.approx(g + 2 * lam * c + lam**2 * q)
        assert a * lam**2 + b * lam + k == pytest.approx(psi_s(t, grad_F_sq(g, c, q, lam), lam, d, s))


def test_curve_equals_a_direct_measurement_at_every_lambda():
    model, batches, probes, seed, s = tiny_gpt2(torch.float64), token_batches(), 6, 3, 2.0
    parts = measure_parts(ModelHessian(model, batches), probes=probes, probe_seed=seed, top_k=2,
                          lanczos_steps=6)["parts"]
    curve = psi_of_lambda(parts, LAMS, s)
    for lam, row in zip(LAMS, curve.itertuples()):
        H = ModelHessian(model, batches, lam=lam)  # ∇²F_λ = ∇²L + λI, ∇F_λ = ∇L + λθ
        est = hutchinson(H, probes, seed=seed)  # the same probes: vᵀ∇²F v = vᵀ∇²L v + λd
        gF = H.grad()
        direct = -est.mean + float(gF @ gF) / s
        scale = max(abs(direct), 1.0)
        assert row.psi_s == pytest.approx(direct, abs=1e-9 * scale), lam
        assert row.laplacian_F == pytest.approx(est.mean, abs=1e-9 * scale)
        assert row.grad_F_sq == pytest.approx(float(gF @ gF), rel=1e-12)
        lo, hi = est.ci95  # of tr ∇²F_λ; Ψ_s decreases in it
        assert (row.psi_s_lo, row.psi_s_hi) == pytest.approx((-hi + float(gF @ gF) / s, -lo + float(gF @ gF) / s),
                                                             abs=1e-9 * scale)


def _parts(t, ci, g, c, q, d):
    return PsiParts(trace_L=t, trace_L_ci95=ci, grad_L_sq=g, theta_dot_grad_L=c, theta_sq=q, d=d)


def _psi_at(parts, lam, s, trace):
    return psi_of_lambda(_parts(trace, None, parts.grad_L_sq, parts.theta_dot_grad_L, parts.theta_sq, parts.d),
                         [lam], s)["psi_s"].iloc[0]


def test_one_sign_change_and_its_interval():
    # Ψ₁(λ) = 4λ² − 99λ − 29: negative at 0, one root r₊ = (99 + √(99² + 4·4·29))/8
    p = _parts(30.0, (20.0, 40.0), 1.0, 0.5, 4.0, 100)
    (sc,) = sign_changes(p, 1.0)
    assert sc.direction == "-+" and sc.lam == pytest.approx((99 + math.sqrt(99**2 + 16 * 29)) / 8, rel=1e-14)
    lo, hi = sc.ci95
    assert lo < sc.lam < hi
    assert _psi_at(p, lo, 1.0, 20.0) == pytest.approx(0.0, abs=1e-9)  # the band's upper edge crosses first
    assert _psi_at(p, hi, 1.0, 40.0) == pytest.approx(0.0, abs=1e-9)
    below, above = psi_of_lambda(p, [0.99 * sc.lam, 1.01 * sc.lam], 1.0)["psi_s"]
    assert below < 0 < above
    assert describe_sign_change(sc.to_dict()).startswith("− → + at λ = 25.04 (95% CI 24.94–25.1")


def test_two_sign_changes_at_a_saddle():
    # negative trace (a saddle): Ψ₁(0) = 10 + 50 > 0, b = −6 − 100: Ψ₁ = λ² − 106λ + 60
    p = _parts(-50.0, (-60.0, -40.0), 10.0, -3.0, 1.0, 100)
    down, up = sign_changes(p, 1.0)
    roots = sorted(np.roots([1.0, -106.0, 60.0]).real)
    assert (down.direction, up.direction) == ("+-", "-+")
    assert (down.lam, up.lam) == pytest.approx(roots, rel=1e-12)
    for sc, t_lo_end, t_hi_end in ((down, -40.0, -60.0), (up, -60.0, -40.0)):  # r₋ falls, r₊ rises with t
        lo, hi = sc.ci95
        assert lo < sc.lam < hi
        assert _psi_at(p, lo, 1.0, t_lo_end) == pytest.approx(0.0, abs=1e-8)
        assert _psi_at(p, hi, 1.0, t_hi_end) == pytest.approx(0.0, abs=1e-8)


def test_no_sign_change_and_open_interval_ends():
    # both roots negative: Ψ₁ = λ² + 19λ + 50 > 0 on λ ≥ 0
    assert sign_changes(_parts(-50.0, (-60.0, -40.0), 0.0, 10.0, 1.0, 1), 1.0) == []
    # Ψ₁ = λ² − λ + (1 − t): at t = −20 no real root, so no sign change is consistent with the data
    (sc,) = sign_changes(_parts(5.0, (-20.0, 30.0), 1.0, 0.0, 1.0, 1), 1.0)
    assert sc.lam == pytest.approx((1 + math.sqrt(17)) / 2)
    assert sc.ci95[0] is None and sc.ci95[1] == pytest.approx((1 + math.sqrt(117)) / 2)
    assert "95% CI none–" in describe_sign_change(sc.to_dict())


def test_lambda_grids():
    p = _parts(30.0, (20.0, 40.0), 1.0, 0.5, 4.0, 100)
    grid = default_lam_grid(p, [1.0])
    assert grid[0] == 0.0 and grid[1] == pytest.approx(1e-6) and grid[-1] >= 10 * sign_changes(p, 1.0)[0].lam
    np.testing.assert_allclose(parse_lam_grid(["1e-3:1e-1:3", "0,5"]), [0.0, 1e-3, 1e-2, 1e-1, 5.0])
    assert parse_lam_grid(None) is None
    for bad in (["-1"], ["1:0.1:3"], ["x"], ["0"]):
        with pytest.raises(ValueError, match=r"^--lam-grid: "):
            parse_lam_grid(bad)


# --------------------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def saved_model(tmp_path_factory) -> Path:
    """A tiny GPT-2 and its byte-level BPE tokenizer saved with ``save_pretrained``, and a
    corpus of four text files."""
    from pydoc_data.topics import topics
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from villani.data.tokenizer import EOS_TOKEN, train_bpe

    root = tmp_path_factory.mktemp("diagnose")
    docs = [topics[k] for k in sorted(topics)][:24]
    (root / "corpus").mkdir()
    for i in range(4):
        (root / "corpus" / f"part{i}.txt").write_text("\n".join(docs[6 * i:6 * i + 6]))
    tok = PreTrainedTokenizerFast(tokenizer_object=train_bpe(docs, 300), eos_token=EOS_TOKEN)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=8, n_layer=2, n_head=2, n_positions=32,
                     bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    GPT2LMHeadModel(cfg).save_pretrained(root / "tiny-gpt2")
    tok.save_pretrained(root / "tiny-gpt2")
    return root


ARGS = ["--seq-len", "16", "--blocks", "8", "--batch-size", "4", "--probes", "6", "--top-k", "2",
        "--lanczos-steps", "8", "--s-values", "1", "2"]


def run_cli(args: list[str], cwd: Path, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(villani.__file__).parents[1]), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, *(launcher or []), "-m", "villani.cli", "diagnose", *args]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _diagnose(saved_model: Path, out: str, *extra: str, launcher=None) -> dict:
    done = run_cli(["--model", str(saved_model / "tiny-gpt2"), "--data", f"files:{saved_model}/corpus/*.txt",
                    *ARGS, "--out", str(saved_model / out), *extra], saved_model, launcher)
    assert done.returncode == 0, done.stderr[-2000:]
    return {"stdout": done.stdout, "json": json.loads((saved_model / out / "diagnosis.json").read_text()),
            "curve": pd.read_csv(saved_model / out / "psi_of_lambda.csv")}


@pytest.fixture(scope="module")
def single(saved_model) -> dict:
    return _diagnose(saved_model, "single")


@pytest.mark.slow
def test_command_on_a_saved_model(saved_model, single):
    rec, curve = single["json"], single["curve"]
    assert rec["model"]["model_type"] == "gpt2" and rec["d"] == rec["model"]["d"]
    assert rec["measurement"] == {"operator": "ModelHessian", "sharded": None, "world_size": 1, "device": "cpu",
                                  "dtype": "float32", "probes": 6, "probe_seed": 0, "top_k": 2, "lanczos_steps": 8,
                                  "basis_device": None}
    assert rec["data"]["blocks"] == 8 and rec["data"]["num_tokens"] == 8 * 15 and rec["data"]["split"] == "train"
    assert len(rec["trace_L"]["samples"]) == 6 and len(rec["top_eigenvalues"]) == 2
    assert rec["trace_L"]["ci95"][0] < rec["trace_L"]["mean"] < rec["trace_L"]["ci95"][1]
    # the CSV is the curve of the JSON's parts, on the JSON's grid, for both s
    parts = PsiParts(rec["trace_L"]["mean"], tuple(rec["trace_L"]["ci95"]), rec["grad_L_sq_norm"],
                     rec["theta_dot_grad_L"], rec["theta_sq_norm"], rec["d"])
    for s in (1.0, 2.0):
        got = curve[curve["s"] == s].reset_index(drop=True)
        pd.testing.assert_frame_equal(got.drop(columns="s"), psi_of_lambda(parts, rec["lam_grid"], s), rtol=1e-12)
        changes = [c.to_dict() for c in sign_changes(parts, s)]
        assert rec["psi_s"][str(s)]["sign_changes"] == changes and changes[-1]["direction"] == "-+"
        # every sign flip between grid neighbours brackets a root of the same direction
        lam, sign = got["lam"].to_numpy(), np.sign(got["psi_s"].to_numpy())
        flips = np.flatnonzero(np.diff(sign) != 0)
        assert len(flips) >= 1
        for i in flips:
            assert any(lam[i] <= c["lam"] <= lam[i + 1] and c["direction"] == ("-+" if sign[i] < 0 else "+-")
                       for c in changes), (lam[i], changes)
    png = saved_model / "single" / "psi_of_lambda.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = single["stdout"]
    assert "tr ∇²L = " in out and "Ψ_1.0(0) = " in out and "− → + at λ = " in out and str(png) in out


class _RunsCode:
    """A pickle whose loading would run a shell command."""

    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def _no_tokenizer(folder: Path) -> str:
    for f in folder.glob("*token*"):
        f.unlink()
    for f in folder.glob("vocab*"):
        f.unlink()
    return f"--model: {folder}: the folder has no tokenizer files (tokenizer.json"


def _bin(folder: Path, data: bytes) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(data)


def _truncated_bin(folder: Path) -> str:
    import io

    buf = io.BytesIO()
    torch.save({"transformer.wte.weight": torch.zeros(3)}, buf)
    _bin(folder, buf.getvalue()[: len(buf.getvalue()) // 2])
    return f"--model: {folder / 'pytorch_model.bin'}: cannot be read as plain tensors: truncated or corrupt"


def _pickled_code(folder: Path) -> str:
    import pickle

    _bin(folder, pickle.dumps(_RunsCode()))
    return (f"--model: {folder / 'pytorch_model.bin'}: cannot be read as plain tensors: a pickle that needs code to "
            "load, refused")


@pytest.mark.parametrize("damage", [
    lambda f: f"--model: {f.parent / 'no' / 'such' / 'dir'}: no such folder (and not a hub name",
    lambda f: [x.unlink() for x in f.iterdir()] and f"--model: {f}: the folder has no config.json and no weights",
    _no_tokenizer, _truncated_bin, _pickled_code,
], ids=["missing", "empty", "no-tokenizer", "truncated-bin", "pickle"])
def test_a_bad_model_folder_is_one_line_naming_it(saved_model, tmp_path, damage, capsys, monkeypatch):
    """What `--model` lacks or holds that cannot be loaded safely, named in one line: never a
    hub error about repo ids, a traceback, or a pickle run."""
    import shutil

    from villani.cli import main

    folder = tmp_path / "model"
    shutil.copytree(saved_model / "tiny-gpt2", folder)
    named = damage(folder)
    model = folder.parent / "no" / "such" / "dir" if "no such folder" in named else folder
    monkeypatch.chdir(tmp_path)  # where the pickle's command would leave its file
    rc = main(["diagnose", "--model", str(model), "--data", f"files:{saved_model}/corpus/*.txt", *ARGS,
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and err.startswith(f"villani: error: {named}"), err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind, rtol", [("exact", 1e-5), ("fsdp", 2e-3)])
def test_torchrun_two_processes_match_one(saved_model, single, kind, rtol):
    """Exact data-parallel products: fp32 summation order only; finite differences on FSDP2
    shards: the fp32 step error (a few 1e-4, docs/curvature.md)."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    rec = _diagnose(saved_model, kind, "--sharded", kind, launcher=launcher)["json"]
    one = single["json"]
    assert rec["measurement"]["world_size"] == 2 and rec["measurement"]["sharded"] == kind
    for key in ("loss", "grad_L_sq_norm", "theta_sq_norm", "d"):
        assert rec[key] == pytest.approx(one[key], rel=1e-6), key
    assert rec["theta_dot_grad_L"] == pytest.approx(one["theta_dot_grad_L"], rel=1e-4, abs=1e-6)
    scale = np.abs(one["trace_L"]["samples"]).max()
    np.testing.assert_allclose(rec["trace_L"]["samples"], one["trace_L"]["samples"], atol=rtol * scale)
    np.testing.assert_allclose(rec["top_eigenvalues"], one["top_eigenvalues"], rtol=rtol)
    for s in ("1.0", "2.0"):
        got, want = rec["psi_s"][s]["sign_changes"], one["psi_s"][s]["sign_changes"]
        assert [c["direction"] for c in got] == [c["direction"] for c in want]
        # a root near 0 moves with the trace's error relative to ‖∇L‖²/s − tr ∇²L
        assert [c["lam"] for c in got] == pytest.approx([c["lam"] for c in want], rel=rtol, abs=1e-6)
