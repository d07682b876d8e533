"""What a stage reads is checked before any number is computed from it.

One check per kind of file the stages exchange: a measure JSON (:func:`measure_record`),
a measure Parquet (:func:`measure_samples`), ``stats.json`` (:func:`data_stats`), token
blocks (:func:`token_blocks`), a checkpoint's JSON (:func:`checkpoint_meta`), a training
segment's work state (:func:`work_state`) and the columns of a CSV (:func:`columns`).
Each returns what it was given (numbers as Python numbers) or raises a one-line
``ValueError`` ``"<file>: <field>: <value> is invalid (expected <what>)"``, so a file
written by hand, by another version or damaged on disk stops the stage with its name
instead of a traceback — or, worse, a silently dropped value.

Numbers are JSON numbers (never booleans) or the strings ``"inf"``/``"-inf"`` that
:func:`villani.io.atomic.write_json` writes for ±∞; NaN is never written (it becomes
``null``), so a NaN read back is an error (:func:`villani.io.atomic.read_json` refuses the
JSON constants ``NaN``/``Infinity`` already).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["invalid", "missing", "number", "integer", "text", "digest_hex", "measure_record", "precision_audit",
           "measure_samples", "data_stats", "token_blocks", "checkpoint_meta", "work_state", "columns", "MAX_VOCAB"]

MAX_VOCAB = 10_000_000  # larger than any tokenizer's vocabulary; a bigger vocab_size is a damaged file
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
SPLITS = ("train", "validation", "test")


def _show(value: Any, width: int = 60) -> str:
    try:
        t = json.dumps(value, default=lambda o: type(o).__name__)
    except (TypeError, ValueError):
        t = type(value).__name__
    return t if len(t) <= width else t[: width - 15] + "…" + t[-10:]


def invalid(path, field: str, value: Any, expected: str) -> ValueError:
    """The one-line error of a field that is not what the writer writes."""
    return ValueError(f"{path}: {field}: {_show(value)} is invalid (expected {expected})")


def missing(path, field: str, expected: str) -> ValueError:
    return ValueError(f"{path}: {field}: missing (expected {expected})")


# --------------------------------------------------------------------------- scalars
def number(v: Any, path, field: str, *, null: bool = False, lo: float | None = None) -> float | None:
    """A finite number or ±inf (``"inf"``/``"-inf"``); ``None`` only when ``null``; ≥ ``lo``."""
    what = "a number" + (" or null" if null else "") + (f" ≥ {lo}" if lo is not None else "")
    if v is None:
        if null:
            return None
        raise invalid(path, field, v, what)
    if isinstance(v, str) and v in ("inf", "-inf"):
        v = float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or math.isnan(v):
        raise invalid(path, field, v, what)
    if lo is not None and v < lo:
        raise invalid(path, field, v, what)
    return float(v)


def integer(v: Any, path, field: str, *, lo: int | None = None, hi: int | None = None, null: bool = False
            ) -> int | None:
    """An integer (a float with an integral value is accepted) in ``[lo, hi]``."""
    rng = "" if lo is None and hi is None else f" in [{lo if lo is not None else '-∞'}, {hi if hi is not None else '∞'}]"
    what = f"an integer{rng}" + (" or null" if null else "")
    if v is None and null:
        return None
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise invalid(path, field, v, what)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise invalid(path, field, v, what)
    return int(v)


def text(v: Any, path, field: str, *, null: bool = False) -> str | None:
    if v is None and null:
        return None
    if not isinstance(v, str):
        raise invalid(path, field, v, "text" + (" or null" if null else ""))
    return v


def digest_hex(v: Any, path, field: str, *, null: bool = False) -> str | None:
    """A sha256 as 64 lower-case hex digits."""
    if v is None and null:
        return None
    if not isinstance(v, str) or not _HEX64.match(v):
        raise invalid(path, field, v, "a sha256: 64 hex digits" + (" or null" if null else ""))
    return v


def _mapping(v: Any, path, field: str) -> Mapping:
    if not isinstance(v, Mapping):
        shown = _show(v) if v is None or isinstance(v, (int, float)) else f"a {type(v).__name__}"
        raise ValueError(f"{path}: {field}: {shown} is invalid (expected an object)")
    return v


def _numbers(v: Any, path, field: str, *, null: bool = True, length: int | None = None) -> list:
    if not isinstance(v, list) or (length is not None and len(v) != length):
        raise invalid(path, field, v, f"a list of {length or 'any number of'} numbers")
    return [number(x, path, f"{field}[{i}]", null=null) for i, x in enumerate(v)]


# --------------------------------------------------------------------------- measurements
# every measurement has these; the other scalars may be null where undefined (grad-noise σ²
# between the first and last checkpoint, a ratio whose denominator is ≤ 0, …)
_REQUIRED = ("d", "theta_sq_norm", "loss", "val_ppl")


def measure_record(rec: Any, path, *, scalars: Iterable[str], labels: Iterable[str], trace_fields: Iterable[str],
                   lam: float | None = None, seed: int | None = None, step: int | None = None,
                   variant: str | None = None) -> dict:
    """A measure JSON: an object whose scalars are numbers (``null`` only where a value can
    be undefined), labels text, ``trace_L`` an object of numbers with ``mean`` and a
    two-number ``ci95``, ``psi_s``/``psi_s_ci95``/``block_traces`` objects of numbers,
    ``top_eigenvalues``/``top_residuals`` lists of numbers; its ``lam``, ``seed``, ``step``
    (and ``variant``) those of the run and checkpoint it is read for."""
    m = _mapping(rec, path, "(top level)")
    for key in _REQUIRED:
        if key not in m:
            raise missing(path, key, "a number")
    for key in scalars:
        if key in m:
            number(m[key], path, key, null=key not in _REQUIRED)
    for key in labels:
        if key in m:
            text(m[key], path, key, null=True)
    for key, want in (("lam", lam), ("seed", seed), ("step", step)):
        if key not in m:
            raise missing(path, key, "the run's " + key)
        got = number(m[key], path, key, lo=0) if key == "lam" else integer(m[key], path, key, lo=0)
        if want is not None and got != float(want):
            raise invalid(path, key, m[key], f"{want}, the {key} of the path it was read from")
    if variant is not None and "variant" in m and m["variant"] != variant:
        raise invalid(path, "variant", m["variant"], f"{variant!r}, the variant of its path")
    tr = _mapping(m.get("trace_L"), path, "trace_L")
    if "mean" not in tr:
        raise missing(path, "trace_L.mean", "a number")
    number(tr["mean"], path, "trace_L.mean")
    for key in trace_fields:
        if key in tr:
            number(tr[key], path, f"trace_L.{key}", null=True)
    if tr.get("ci95") is not None:
        _numbers(tr["ci95"], path, "trace_L.ci95", length=2)
    if m.get("lambda_median_ci95") is not None:
        _numbers(m["lambda_median_ci95"], path, "lambda_median_ci95", length=2)
    for group in ("psi_s", "block_traces"):
        for k, v in _mapping(m.get(group) or {}, path, group).items():
            number(v, path, f"{group}.{k}", null=group == "block_traces")
    for s in (m.get("psi_s") or {}):
        number(_float_key(s, path, f"psi_s.{s}"), path, f"psi_s.{s}", lo=0)
    for s, ci in _mapping(m.get("psi_s_ci95") or {}, path, "psi_s_ci95").items():
        if ci is not None:
            _numbers(ci, path, f"psi_s_ci95.{s}", length=2)
    for key in ("top_eigenvalues", "top_residuals"):
        if m.get(key) is not None:
            _numbers(m[key], path, key)
    for group, fields in (("lanczos", ("steps",)), ("slq", ("steps_first", "num_probes"))):
        for k in fields:
            if (m.get(group) or {}).get(k) is not None:
                integer(_mapping(m[group], path, group)[k], path, f"{group}.{k}", lo=0)
    if m.get("cost") is not None:  # villani.measure/2 and later: the counts of villani.measure.cost_model
        cost = _mapping(m["cost"], path, "cost")
        for k in COST_COUNTS:
            if k not in cost:
                raise missing(path, f"cost.{k}", "a non-negative integer")
            integer(cost[k], path, f"cost.{k}", lo=0)
    precision_audit(m, path)
    return dict(m)


AUDIT_NUMBERS = ("rel_product_max", "rel_product_median", "rel_quadratic_max", "rel_quadratic_median",
                 "trace_rel_error", "trace_rel_stderr", "bound")
_FULL_PRECISION = (None, "fp32", "highest")  # what a record without an audit may have used (/1, /2: "fp32")


@functools.cache
def _precisions() -> tuple[str, ...]:
    from villani.plan.config import load_schema

    return tuple(load_schema()["properties"]["measure"]["properties"]["precision"]["enum"])


def _schema_version(m: Mapping) -> int:
    found = re.fullmatch(r"villani\.measure/(\d+)", str(m.get("schema", "")))
    return int(found.group(1)) if found else 0


def precision_audit(m: Mapping, path) -> None:
    """A measure JSON's ``precision_audit`` (:mod:`villani.measure.precision_audit`): required
    from ``villani.measure/3`` on and wherever the products were not fp32 "highest"; its
    precisions named, its numbers non-negative, ``passed`` what its ratios and ``fraction``
    say, and never a failed audit behind numbers published below "highest"."""
    a = m.get("precision_audit")
    if a is None:
        if _schema_version(m) >= 3 or m.get("precision") not in _FULL_PRECISION:
            raise missing(path, "precision_audit", "the job's precision audit (villani.measure/3; re-run villani measure)")
        return
    a = _mapping(a, path, "precision_audit")
    allowed = _precisions()
    for k in ("requested", "used", "audited"):
        if a.get(k) not in allowed:
            raise invalid(path, f"precision_audit.{k}", a.get(k), f"one of {', '.join(allowed)}")
    if m.get("precision") != a["used"]:
        raise invalid(path, "precision", m.get("precision"), f"{a['used']!r}, precision_audit.used")
    integer(a.get("vectors"), path, "precision_audit.vectors", lo=1)
    integer(a.get("products"), path, "precision_audit.products", lo=0)
    for k in AUDIT_NUMBERS:
        number(a.get(k), path, f"precision_audit.{k}", null=True, lo=0)
    fraction = number(a.get("fraction"), path, "precision_audit.fraction", lo=0)
    ratios = _mapping(a.get("error_over_stderr"), path, "precision_audit.error_over_stderr")
    if not ratios:
        raise missing(path, "precision_audit.error_over_stderr.trace_L", "a number or null")
    values = [number(v, path, f"precision_audit.error_over_stderr.{k}", null=True, lo=0) for k, v in ratios.items()]
    passed = all(v is not None and v <= fraction for v in values)
    if a.get("passed") is not passed:
        raise invalid(path, "precision_audit.passed", a.get("passed"),
                      f"{str(passed).lower()}: error_over_stderr against fraction {fraction}")
    if a["used"] != "highest" and not passed:
        raise invalid(path, "precision_audit.used", a["used"], "highest: a failed audit recomputes the trace there")
    if a.get("fallback") is not None:
        fb = _mapping(a["fallback"], path, "precision_audit.fallback")
        for k in ("products", "discarded_products"):
            integer(fb.get(k), path, f"precision_audit.fallback.{k}", lo=0)
        number(fb.get("seconds"), path, "precision_audit.fallback.seconds", lo=0)


COST_COUNTS = ("products", "graph_builds", "product_tokens", "build_tokens", "gradient_tokens", "forward_tokens",
               "tokens_per_product")


def _float_key(s: str, path, field: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise invalid(path, field, s, "a number as key (the s of Ψ_s)") from None


SAMPLE_COLUMNS = {"kind": "text", "probe": "integer", "index": "integer", "block": "text", "value": "number",
                  "weight": "number"}


def measure_samples(df, path):
    """A measure Parquet: the columns of :data:`SAMPLE_COLUMNS` with their kinds, no NaN value."""
    columns(df, path, {k: v for k, v in SAMPLE_COLUMNS.items() if k != "block"})
    bad = df["value"].isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise invalid(path, f"value[{i}] (kind {df['kind'].iloc[i]})", None, "a number")
    return df


def columns(df, path, required: Mapping[str, str]):
    """A table holds ``required`` columns, each of its kind (``number``, ``integer``, ``text``)."""
    from pandas.api import types

    for col, kind in required.items():
        if col not in df.columns:
            raise ValueError(f"{path}: column {col!r} missing (expected columns {', '.join(required)}; "
                             f"found {', '.join(map(str, df.columns))})"[:400])
        ok = {"number": types.is_numeric_dtype, "integer": types.is_integer_dtype,
              "text": lambda s: types.is_string_dtype(s) or types.is_object_dtype(s)}[kind](df[col])
        if ok and kind == "number" and types.is_bool_dtype(df[col]):
            ok = False
        if not ok:
            raise invalid(path, f"column {col}", str(df[col].dtype), f"{kind} values")
    return df


# --------------------------------------------------------------------------- data
def data_stats(stats: Any, path) -> dict:
    """``stats.json``: ``vocab_size`` an integer in [2, MAX_VOCAB], ``seq_len`` ≥ 2,
    ``eos_token_id`` in [0, vocab_size) or null, and per split an object with integer
    ``tokens`` and ``blocks`` (≥ 1) and, where recorded, the file's ``sha256``; where recorded,
    ``baselines.<model>`` objects with ``val_ppl`` ≥ 1 and ``val_loss`` ≥ 0 (:mod:`villani.data.baselines`)."""
    s = _mapping(stats, path, "(top level)")
    if "vocab_size" not in s:
        raise missing(path, "vocab_size", f"an integer in [2, {MAX_VOCAB}]")
    vocab = integer(s["vocab_size"], path, "vocab_size", lo=2, hi=MAX_VOCAB)
    if "seq_len" in s:
        integer(s["seq_len"], path, "seq_len", lo=2)
    if s.get("eos_token_id") is not None:
        integer(s["eos_token_id"], path, "eos_token_id", lo=0, hi=vocab - 1)
    splits = _mapping(s.get("splits"), path, "splits")
    for split in SPLITS:
        if split not in splits:
            raise missing(path, f"splits.{split}", "an object with tokens and blocks")
        sp = _mapping(splits[split], path, f"splits.{split}")
        integer(sp.get("tokens"), path, f"splits.{split}.tokens", lo=0)
        integer(sp.get("blocks"), path, f"splits.{split}.blocks", lo=1)
        if "sha256" in sp:
            digest_hex(sp["sha256"], path, f"splits.{split}.sha256")
    if "baselines" in s:
        for model, rec in _mapping(s["baselines"], path, "baselines").items():
            rec = _mapping(rec, path, f"baselines.{model}")
            for key, lo in (("val_ppl", 1.0), ("val_loss", 0.0)):
                if key not in rec:
                    raise missing(path, f"baselines.{model}.{key}", f"a number ≥ {lo:g}")
                number(rec[key], path, f"baselines.{model}.{key}", lo=lo)
    return dict(s)


def token_blocks(blocks, path, *, seq_len: int, vocab_size: int, n_blocks: int | None = None, stats_path=None):
    """Token blocks ``(N, seq_len)`` of a split: the block length of the params, every id
    below the vocabulary size of ``stats.json``, N blocks as recorded there."""
    n, length = blocks.shape
    where = f" of {stats_path}" if stats_path else ""
    if length != seq_len:
        raise ValueError(f"{path}: blocks of {length} tokens, but data.seq_len = {seq_len} "
                         "(tokenized under other parameters: rerun `villani tokenize`)")
    top = int(blocks.max())
    if top >= vocab_size:
        raise ValueError(f"{path}: token id {top} ≥ vocab_size {vocab_size}{where} "
                         "(expected ids below the vocabulary size: rerun `villani tokenize`)")
    if n_blocks is not None and n != n_blocks:
        raise ValueError(f"{path}: {n} blocks, but {n_blocks} recorded{where} (rerun `villani tokenize`)")
    return blocks


# --------------------------------------------------------------------------- training
def checkpoint_meta(meta: Any, path) -> dict:
    """A checkpoint's JSON: ``weights_sha256`` (and ``state_sha256`` or null) as sha256,
    integer ``step`` (and ``seed``, ``tokens_seen``, ``d``), numbers ``lam``,
    ``theta_sq_norm``, ``train_loss``, ``wall_clock_s``, text ``digest``."""
    m = _mapping(meta, path, "(top level)")
    if "weights_sha256" not in m:
        raise ValueError(f"{path}: checkpoint metadata lacks weights_sha256 (not a villani checkpoint)")
    digest_hex(m["weights_sha256"], path, "weights_sha256")
    digest_hex(m.get("state_sha256"), path, "state_sha256", null=True)
    if "step" not in m:
        raise missing(path, "step", "an integer ≥ 0")
    integer(m["step"], path, "step", lo=0)
    for key in ("seed", "tokens_seen", "d"):
        if key in m:
            integer(m[key], path, key, lo=0)
    for key in ("lam", "theta_sq_norm", "wall_clock_s"):
        if key in m:
            number(m[key], path, key, lo=0)
    if "train_loss" in m:
        number(m["train_loss"], path, "train_loss", null=True)
    if "digest" in m:
        text(m["digest"], path, "digest")
    return dict(m)


_STATE_TENSORS = ("torch_rng", "noise_rng", "cuda_rng")
_STATE_DICTS = ("optimizer", "scheduler", "model")


def work_state(state: Any, path, model: Mapping[str, Any]) -> dict:
    """A training segment's work state: an object with ``optimizer`` and ``scheduler``
    state dicts, the RNG states as uint8 tensors, integer ``step`` and ``tokens_seen``,
    number ``wall_clock_s``, text ``digest``, ``log_bytes``/``log_rows`` and ``model``: a
    tensor of the shape and dtype of every entry of ``model`` (the segment's state dict)."""
    import torch

    s = _mapping(state, path, "(top level)")
    for key in _STATE_DICTS:
        _mapping(s.get(key), path, key)
    for key in _STATE_TENSORS:
        v = s.get(key)
        if not (isinstance(v, torch.Tensor) and v.dtype == torch.uint8):
            raise invalid(path, key, type(v).__name__, "a uint8 tensor (an RNG state)")
    opt = s["optimizer"]
    if not isinstance(opt.get("state"), Mapping) or not isinstance(opt.get("param_groups"), list):
        raise invalid(path, "optimizer", sorted(map(str, opt)), "an optimizer state dict (state, param_groups)")
    for key in ("step", "tokens_seen", "log_bytes", "log_rows"):
        integer(s.get(key), path, key, lo=0)
    number(s.get("wall_clock_s"), path, "wall_clock_s", lo=0)
    text(s.get("digest"), path, "digest")
    weights = s["model"]
    if set(weights) != set(model):
        extra, lacking = sorted(set(weights) - set(model)), sorted(set(model) - set(weights))
        raise invalid(path, "model", (lacking or extra)[:3], "the tensors of the run's model"
                      + (f"; lacks {len(lacking)}" if lacking else "") + (f"; {len(extra)} unknown" if extra else ""))
    for name, ref in model.items():
        w = weights[name]
        if not isinstance(w, torch.Tensor) or tuple(w.shape) != tuple(ref.shape) or w.dtype != ref.dtype:
            got = f"{tuple(w.shape)} {w.dtype}" if isinstance(w, torch.Tensor) else type(w).__name__
            raise invalid(path, f"model.{name}", got, f"a tensor {tuple(ref.shape)} {ref.dtype}")
    return dict(s)
