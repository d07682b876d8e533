#!/usr/bin/env bash
# GPU check: the CUDA code path end to end, one table at the end. In full it is more than one
# 10-minute device call (≈ 11 minutes on an H200 before the parts marked [new]); skip the parts
# measured before with GPU_CHECK_SKIP. The training session of issue 38 (the captured step, runs
# side by side): ≈ 9 minutes [not measured on a GPU]:
#
#   make install && bash benchmarks/gpu_check.sh            # from the repository root: every part
#   GPU_CHECK_SKIP="hvp-small hvp-125m measure profile-125m regimes-125m floor-125m precision workflow" \
#     bash benchmarks/gpu_check.sh                          # the training parts alone
#
# Parts, in the order they run (each timed; a failed part is reported in the table and the
# rest still run; the numbers first, the end-to-end workflow last):
#   env        torch, CUDA, the device
#   tokenize   the rehearsal corpus (configs/rehearsal.yaml: GPT-Neo-125M, seq 512, a local
#              BPE of 50,257 tokens) — no download
#   train-bf16 `villani train` at 125M, precision bf16 (autocast, fp32 master weights), the eager
#              step (train.compile: off), at the paper's batch (1 × 512 tokens) and at 8 × 512:
#              median tokens/s of the per-step log
#   train-captured-b1 [new] the same at 1 × 512 with the captured step (train.compile: on: CUDA
#              graphs, villani.training.step): median tokens/s, the first step's seconds (the
#              compile), inductor's "skipping cudagraphs" hints (TORCH_LOGS=perf_hints; 0 wanted)
#   agree      [new] the eager and the captured run's losses step by step (same seed, batches,
#              bf16): the largest relative difference, the last losses
#   pack       [new] `villani train --seed 0 … k-1 --per-device k` with the captured step, for each
#              k of GPU_CHECK_PACK: k runs side by side on the GPU — each run's median tokens/s,
#              their sum against train-captured-b1's one run, each process's peak GPU memory
#              (nvidia-smi every second); with GPU_CHECK_MPS=1 part pack-mps repeats it under
#              MPS (VILLANI_MPS=1)
#   autocast   [new] benchmarks/train_step.py --mode autocast: one bf16 step at 125M, every
#              operator by input dtype — what runs in float32
#   hvp        benchmarks/hvp.py --device cuda --k 8 (ours vs PyHessian vs curvlinops, single
#              and 8 batched probes) on its small GPT-Neo and at 125M (1 × 512 tokens)
#   measure    one full `villani measure` job at 125M on the paper's measurement set
#              (64 blocks × 512 tokens; probe and step counts cut to fit the time), with the
#              peak CUDA memory (torch.cuda.max_memory_allocated)
#   profile-125m  benchmarks/hvp.py --mode profile at 125M (1 × 512): ours vs PyHessian, one
#              product each under torch.profiler — kernels, device time, the operators that differ
#   regimes-125m  benchmarks/hvp.py --mode regimes at 125M (1 × 512): build + first, next, rebuilt
#   floor-125m benchmarks/hvp_floor.py --linearize at 125M (1 × 512): PyHessian's kept-graph product,
#              ours, its matrix products alone (the floor), a compiled linearized product (triton)
#              with its one-time trace + compile (minutes: with the 15 device minutes of a session,
#              skip the parts measured before) and peak memory
#   precision  `villani measure` jobs at 125M on the paper's measurement set, plain Hutchinson
#              trace, at measure.precision highest / tf32 / bf16 and probe_block 1 / 8: seconds
#              per trace product and each job's precision audit (error over the standard error)
#   workflow   the tiny default workflow (snakemake --profile profiles/local) in a copy of the
#              repository; jobs pick the CUDA device by themselves (pick_device); checks that
#              every checkpoint and measurement says device "cuda"
# Needs: the venv of `make install` (PyHessian and curvlinops come from requirements/oracle.txt).
# Environment: PYTHON (default .venv/bin/python), OUT (default a new folder under /tmp),
#   GPU_CHECK_TRAIN_STEPS (40), GPU_CHECK_BLOCKS (64 measurement blocks), GPU_CHECK_PROBES (8),
#   GPU_CHECK_LANCZOS (16), GPU_CHECK_SLQ (2), GPU_CHECK_REPEATS (5), GPU_CHECK_CORES (8),
#   GPU_CHECK_PRECISION (the precision part's jobs as precision:probe_block, default
#   "highest:8 tf32:8 bf16:8"; the part `measure` is highest:1 with Lanczos),
#   GPU_CHECK_PACK ("2 4": the k of part pack), GPU_CHECK_MPS (1: part pack-mps too),
#   GPU_CHECK_SKIP (parts to skip, e.g. "workflow hvp-125m"), GPU_CHECK_OVERLAY (a parameter file
#   read after configs/rehearsal.yaml, e.g. a smaller model), GPU_CHECK_DEVICE (cuda; `cpu` only
#   to smoke-test this script's plumbing with a small overlay).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python; fi
fi
PYTHON="$(command -v "$PYTHON")"
export PATH="$(dirname "$PYTHON"):$PATH"
OUT="${OUT:-$(mktemp -d /tmp/villani-gpu-check.XXXXXX)}"
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VILLANI_PROGRESS_INTERVAL=15
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
SKIP=" ${GPU_CHECK_SKIP:-} "
STEPS="${GPU_CHECK_TRAIN_STEPS:-40}"
BLOCKS="${GPU_CHECK_BLOCKS:-64}"
PROBES="${GPU_CHECK_PROBES:-8}"
LANCZOS="${GPU_CHECK_LANCZOS:-16}"
SLQ="${GPU_CHECK_SLQ:-2}"
REPEATS="${GPU_CHECK_REPEATS:-5}"
PRECISION_JOBS="${GPU_CHECK_PRECISION:-highest:8 tf32:8 bf16:8}"
# the training keys of every run here; the measure overlays repeat them (a measure job refuses a
# checkpoint trained under other parameters; train.compile is in no digest)
TRAIN_KEYS="steps: $STEPS, warmup_steps: 5, checkpoints: {count: 1}, segments: 1, save_every: 100000, precision: bf16"
PACK="${GPU_CHECK_PACK:-2 4}"
CORES="${GPU_CHECK_CORES:-8}"
RES="$OUT/results"
BASE=(--params configs/rehearsal.yaml)
if [[ -n "${GPU_CHECK_OVERLAY:-}" ]]; then BASE+=(--params "$(realpath "$GPU_CHECK_OVERLAY")"); fi
declare -a ROWS=()
FAILED=0

# part NAME COMMAND...: run COMMAND with its output in $OUT/NAME.log; its one-line result
# is whatever it wrote to $OUT/NAME.result
part() {
  local name="$1"; shift
  local t0 t1 status
  if [[ "$SKIP" == *" $name "* ]]; then ROWS+=("| $name | skipped | 0 | |"); return 0; fi
  echo "== $name ($(date +%T))" >&2
  t0=$(date +%s%N)
  # in a subshell with errexit of its own: any failing command fails the part (errexit is
  # ignored inside an `if` condition, so `if "$@"` would report only the last command)
  set +e; (set -e; "$@") >"$OUT/$name.log" 2>&1; local rc=$?; set -e
  if (( rc == 0 )); then status=ok; else status="FAILED (rc $rc, see $OUT/$name.log)"; FAILED=1; fi
  t1=$(date +%s%N)
  ROWS+=("| $name | $status | $(( (t1 - t0) / 1000000000 )) | $(cat "$OUT/$name.result" 2>/dev/null || true) |")
  echo "   $status" >&2
}

env_check() {
  "$PYTHON" - "$DEVICE" >"$OUT/env.result" <<'EOF'
import sys
import torch
if sys.argv[1] == "cuda":
    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    p = torch.cuda.get_device_properties(0)
    print(f"{p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}")
else:
    print(f"device {sys.argv[1]} (plumbing smoke test, not a GPU check), torch {torch.__version__}")
EOF
}

workflow() {
  "$PYTHON" benchmarks/workflow.py --cores "$CORES" --keep "$OUT/workflow" | tee "$OUT/workflow.out"
  head -1 "$OUT/workflow.out" | sed 's/ (.*//' >"$OUT/workflow.result.tmp"
  "$PYTHON" - "$OUT/workflow/results" "$DEVICE" >>"$OUT/workflow.result.tmp" <<'EOF'
import json, sys
from pathlib import Path
root, device = Path(sys.argv[1]), sys.argv[2]
ckpts = [json.loads(p.read_text()) for p in root.glob("runs/*/*/*/*/ckpt/step*/checkpoint.json")]
meas = [json.loads(p.read_text()) for p in root.glob("runs/*/*/*/*/measure/step*.json")]
devices = {c["device"] for c in ckpts} | {m["device"] for m in meas}
assert ckpts and meas and devices == {device}, f"devices {devices}"
print(f"; {len(ckpts)} checkpoints and {len(meas)} measurements, all on {device}")
EOF
  tr -d '\n' <"$OUT/workflow.result.tmp" >"$OUT/workflow.result"
}

tokenize() {
  "$PYTHON" -m villani.cli tokenize "${BASE[@]}" --results "$RES"
  grep -o 'train [0-9]* blocks' "$OUT/tokenize.log" | head -1 >"$OUT/tokenize.result" || true
}

train_bf16() {  # train_bf16 BATCH COMPILE NAME DIR: one run into $RES/DIR, its step log in $OUT/NAME.result
  local batch="$1" compile="$2" name="$3" dir="$RES/$4" overlay="$OUT/$3.yaml"
  cat >"$overlay" <<EOF
train: {$TRAIN_KEYS, batch_size: $batch, compile: "$compile"}
EOF
  TORCH_LOGS=perf_hints "$PYTHON" -m villani.cli train "${BASE[@]}" --params "$overlay" --results "$dir" \
    --lam 0.001 --seed 0 --until "$STEPS" --device "$DEVICE"
  "$PYTHON" - "$dir" "$batch" "$DEVICE" "$compile" "$OUT/$name.log" >"$OUT/$name.result" <<'EOF'
import json, sys
from pathlib import Path
import pandas as pd
root, batch, device, compile_, log_file = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
log = pd.read_csv(next(root.glob("runs/*/adamw/*/*/logs/seg*.csv")))
meta = json.loads(sorted(root.glob("runs/*/adamw/*/*/ckpt/step*/checkpoint.json"))[-1].read_text())
mode = "eager" if compile_ == "off" else ("captured" if device == "cuda" else "compiled")
assert meta["device"] == device and meta["precision"] == ("bf16" if device == "cuda" else "fp32"), meta
assert meta["train_step"] == mode, meta["train_step"]
skips = open(log_file).read().count("skipping cudagraphs")
print(f"{mode}: {log['tokens_per_s'].iloc[5:].median():,.0f} tokens/s at {batch} × 512 (median of steps "
      f"6–{len(log)}; first step {log['wall_clock_s'].iloc[0]:.1f} s), loss {log['loss'].iloc[0]:.2f} → "
      f"{log['loss'].iloc[-1]:.2f}" + (f"; 'skipping cudagraphs' {skips}×" if mode == "captured" else ""))
EOF
}

link_data() {  # the runs read the tokenized corpus of part tokenize
  local d
  for d in b1 b8 c1 $(for k in $PACK; do echo "p$k m$k"; done); do
    mkdir -p "$RES/$d"; ln -sfn "$RES/data" "$RES/$d/data"
  done
}

agree() {  # the eager (b1) and the captured (c1) run's per-step logs, step by step
  "$PYTHON" - "$RES/b1" "$RES/c1" >"$OUT/agree.result" <<'EOF'
import sys
from pathlib import Path
import pandas as pd
a, b = (pd.read_csv(next(Path(r).glob("runs/*/adamw/*/*/logs/seg*.csv"))) for r in sys.argv[1:3])
assert list(a["step"]) == list(b["step"]) and list(a["lr"]) == list(b["lr"])
rel = (a["loss"] - b["loss"]).abs() / a["loss"].abs()
grad = ((a["grad_norm"] - b["grad_norm"]).abs() / a["grad_norm"]).max()
print(f"{len(a)} steps: loss relative difference max {rel.max():.2e} (step {int(a['step'][rel.idxmax()])}), "
      f"median {rel.median():.2e}; last loss eager {a['loss'].iloc[-1]:.4f}, captured {b['loss'].iloc[-1]:.4f}; "
      f"gradient norm max relative difference {grad:.2e}")
EOF
}

pack() {  # pack MPS: for each k of $PACK, k runs side by side (captured step): tokens/s, GPU memory
  local mps="$1" k sampler prefix
  prefix=$([[ "$mps" == 1 ]] && echo m || echo p)
  : >"$OUT/pack$mps.rows"
  for k in $PACK; do
    cat >"$OUT/pack-$k.yaml" <<EOF
train: {$TRAIN_KEYS, batch_size: 1, compile: "on", seeds: [$(seq -s ', ' 0 $((k - 1)))]}
EOF
    sampler=""
    if [[ "$DEVICE" == cuda ]]; then
      nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -l 1 >"$OUT/pack$mps-$k.smi" &
      sampler=$!
    fi
    # shellcheck disable=SC2046  # one argument per seed
    VILLANI_MPS="$mps" "$PYTHON" -m villani.cli train "${BASE[@]}" --params "$OUT/pack-$k.yaml" \
      --results "$RES/$prefix$k" --lam 0.001 --seed $(seq 0 $((k - 1))) --per-device "$k" --until "$STEPS" \
      --device "$DEVICE"
    if [[ -n "$sampler" ]]; then kill "$sampler"; wait "$sampler" 2>/dev/null || true; fi
    "$PYTHON" - "$RES/$prefix$k" "$k" "$OUT/pack$mps-$k.smi" "$OUT/train-captured-b1.result" \
      >>"$OUT/pack$mps.rows" <<'EOF'
import re, sys
from pathlib import Path
import pandas as pd
root, k, smi, one = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
logs = [pd.read_csv(f) for f in sorted(root.glob("runs/*/adamw/*/seed*/logs/seg*.csv"))]
assert len(logs) == k, len(logs)
rates = [log["tokens_per_s"].iloc[5:].median() for log in logs]
peak = {}
for line in smi.read_text().splitlines() if smi.exists() else []:
    pid, mib = (x.strip() for x in line.split(",")[:2])
    if mib.isdigit():
        peak[pid] = max(peak.get(pid, 0), int(mib))
single = re.match(r"(?:captured|compiled): ([\d,]+) tokens/s", one.read_text()) if one.exists() else None
gain = f" = {sum(rates) / float(single.group(1).replace(',', '')):.2f}× one run alone" if single else ""
mem = (f"; peak GPU memory per process {max(peak.values()) / 1024:.1f} GiB, together {sum(peak.values()) / 1024:.1f}"
       " GiB" if peak else "")
print(f"k = {k}: {' + '.join(f'{r:,.0f}' for r in rates)} = {sum(rates):,.0f} tokens/s{gain}{mem}")
EOF
  done
  paste -sd';' "$OUT/pack$mps.rows" >"$OUT/pack$([[ "$mps" == 1 ]] && echo -mps).result"
}

autocast_ops() {  # which operators of a bf16 training step take float32 inputs
  "$PYTHON" benchmarks/train_step.py --mode autocast --device "$DEVICE" "${BASE[@]}" --root "$RES" \
    | tee "$OUT/autocast.out"
  paste -sd';' "$OUT/autocast.out" >"$OUT/autocast.result"
}

hvp_lines() {  # hvp_lines NAME PATTERN AFTER ARGS...: hvp.py ARGS; the lines matching PATTERN, each
  local name="$1" pattern="$2" after="$3"; shift 3   # with AFTER lines after it, are the result
  "$PYTHON" benchmarks/hvp.py --device "$DEVICE" --repeats "$REPEATS" "$@"
  grep --no-group-separator -A"$after" -E "$pattern" "$OUT/$name.log" | tr -s ' ' | paste -sd';' >"$OUT/$name.result"
}

floor() {  # floor NAME ARGS...: hvp_floor.py --linearize ARGS; the multiply-adds, the compile and the wall table
  local name="$1"; shift
  "$PYTHON" benchmarks/hvp_floor.py --device "$DEVICE" --repeats "$REPEATS" --linearize "$@"
  grep --no-group-separator -E -A4 "multiply-adds|trace \+ compile|^wall seconds|one-time|^peak" "$OUT/$name.log" \
    | grep -v -E "^  round|^CPU|^\[W|USDT" | tr -s ' ' | paste -sd';' >"$OUT/$name.result"
}

hvp() {  # hvp NAME ARGS...
  local name="$1"; shift
  "$PYTHON" benchmarks/hvp.py --device "$DEVICE" --k 8 --repeats "$REPEATS" "$@"
  "$PYTHON" - "$OUT/$name.log" >"$OUT/$name.result" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
d = re.search(r"GPT-Neo d=([\d,]+)", text).group(1)
rows = {m.group(1).strip(): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^(ours \(double[^\n]*?|ours, is_grads_batched k=\d+|PyHessian|curvlinops(?: k=\d+)?)"
                             r"\s+([\d.]+)\s+([\d.]+)$", text, re.M)}
short = {"ours (double backward, fused CE, graph reuse)": "ours"}
parts = [f"{short.get(n, n)} {s * 1e3:.1f} ms ({g:.2f}× grad)" for n, (s, g) in rows.items()]
ratios = re.findall(r"^ratio (ours/\w+)\s+= ([\d.]+)", text, re.M)
peak = re.search(r"peak CUDA memory: ([\d.]+ GiB)", text)
print(f"d = {d}: " + "; ".join(parts) + "; " + ", ".join(f"{a} {b}" for a, b in ratios)
      + (f"; peak {peak.group(1)}" if peak else ""))
EOF
}

measure_125m() {
  local overlay="$OUT/measure.yaml"
  cat >"$overlay" <<EOF
train: {$TRAIN_KEYS}
measure: {blocks: $BLOCKS, batch_size: 8, num_probes: $PROBES, top_k: $(( LANCZOS < 8 ? LANCZOS : 8 )), lanczos_steps: $LANCZOS,
          slq_probes: $SLQ, slq_steps: $LANCZOS, noise_sigma_batches: 4}
EOF
  "$PYTHON" - "$RES/b1" "$STEPS" "$DEVICE" "${BASE[@]}" --params "$overlay" >"$OUT/measure.result" <<'EOF'
import json, sys
import torch
from villani.cli import main
from villani.measure.hvp_cost import PeakMemory
import contextlib
root, step, device, *params = sys.argv[1:]
with PeakMemory(torch.device(device)) as mem, contextlib.redirect_stdout(sys.stderr):
    rc = main(["measure", *params, "--results", root, "--lam", "0.001", "--seed", "0", "--step", step,
               "--device", device])
assert rc == 0, rc
rec = json.loads(next(__import__("pathlib").Path(root).glob(f"runs/*/adamw/*/*/measure/step{int(step):07d}.json")).read_text())
b = rec["seconds_breakdown"]
print(f"{rec['seconds']:.0f} s, {rec['hvp_count']} HVPs on {rec['measurement_set']['num_tokens']:,} tokens: "
      f"{b['hutchinson'] / rec['trace_L']['num_probes']:.2f} s/HVP (Hutchinson), gradient graph {b['gradient']:.1f} s, "
      f"validation {b['validation']:.1f} s; peak {mem.peak() / 2**30:.1f} GiB; device {rec['device']}")
EOF
}

measure_precision() {  # one measure job per (precision, probe_block) on the checkpoint of train-bf16-b1
  "$PYTHON" - "$RES/b1" "$STEPS" "$DEVICE" "$OUT" "$PROBES" "$BLOCKS" "$PRECISION_JOBS" "$TRAIN_KEYS" "${BASE[@]}" >"$OUT/precision.result" <<'EOF'
import contextlib, json, shutil, sys
from pathlib import Path
import torch
from villani.cli import main
from villani.measure.hvp_cost import PeakMemory
root, step, device, out, probes, blocks, jobs, train_keys, *params = sys.argv[1:]
rows = []
for precision, block in (job.split(":") for job in jobs.split()):
    overlay = Path(out) / f"precision-{precision}-k{block}.yaml"
    overlay.write_text(
        f"train: {{{train_keys}}}\n"
        f"measure: {{blocks: {blocks}, batch_size: 8, num_probes: {probes}, min_probes: {probes}, trace_rel_ci: null, "
        "trace_estimator: hutchinson, top_k: 2, lanczos_steps: 4, slq_probes: 1, slq_steps: 4, "
        f"noise_sigma_batches: 2, precision: {precision}, probe_block: {block}}}\n")
    if device == "cuda":
        torch.cuda.empty_cache()
    with PeakMemory(torch.device(device)) as mem, contextlib.redirect_stdout(sys.stderr):
        rc = main(["measure", *params, "--params", str(overlay), "--results", root, "--lam", "0.001", "--seed", "0",
                   "--step", step, "--device", device])
    assert rc == 0, rc
    src = next(Path(root).glob(f"runs/*/adamw/*/*/measure/step{int(step):07d}.json"))
    shutil.copy(src, Path(out) / f"precision-{precision}-k{block}.json")
    rec = json.loads(src.read_text())
    a, b, tr = rec["precision_audit"], rec["seconds_breakdown"], rec["trace_L"]
    e = a["error_over_stderr"]
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"
    rows.append(f"{precision} k={block}: {b['hutchinson'] / tr['num_probes']:.2f} s/trace product "
                f"(used {a['used']}, audited {a['audited']}: rel. product error {a['rel_product_max']:.1e}, "
                f"error/stderr trace {fmt(e['trace_L'])}, groups {fmt(e['block_traces'])}, ‖H‖_F² {fmt(e['frob_sq'])}, "
                f"{'passed' if a['passed'] else 'FAILED'}); peak {mem.peak() / 2**30:.1f} GiB")
    print(rows[-1], file=sys.stderr, flush=True)
print("; ".join(rows))
EOF
}

part env env_check
part tokenize tokenize
link_data
part train-bf16-b1 train_bf16 1 off train-bf16-b1 b1
part train-bf16-b8 train_bf16 8 off train-bf16-b8 b8
part train-captured-b1 train_bf16 1 on train-captured-b1 c1
part agree agree
part pack pack 0
if [[ "${GPU_CHECK_MPS:-0}" == 1 ]]; then part pack-mps pack 1; fi
part autocast autocast_ops
part hvp-small hvp hvp-small
part hvp-125m hvp hvp-125m --vocab 50257 --hidden 768 --layers 12 --heads 12 --seq 512 --batch 1
part measure measure_125m
part profile-125m hvp_lines profile-125m "ms wall per product" 0 --mode profile --model gpt-neo-125m --seq 512 --batch 1
part regimes-125m hvp_lines regimes-125m "^wall seconds" 5 --mode regimes --model gpt-neo-125m --seq 512 --batch 1
part floor-125m floor floor-125m --model gpt-neo-125m --seq 512 --batch 1
part precision measure_precision
part workflow workflow   # last: the parts above give the numbers, this one the end-to-end CUDA path

echo
echo "GPU check, $(date -u +%Y-%m-%dT%H:%MZ), outputs in $OUT"
echo
echo "| part | status | seconds | result |"
echo "|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
exit "$FAILED"
