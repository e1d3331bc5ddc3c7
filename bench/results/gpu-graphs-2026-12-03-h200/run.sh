#!/bin/bash
# Issue 20 item 2: decode steps replayed from CUDA graphs (model/forward.c step_recorded).
# PART=1: the GPU tests (test_gpu_graphs new), then decode at a 64-token context, P1 N1
# on one GPU (NCCL), one 64-token prompt and 64 new tokens, for model-small, the default
# model and model-deep: the binary of the commit before (.devrun/old/sparsecp), this
# tree's with --no-cuda-graphs, and this tree's (graphs on), each unprofiled, then
# profiled with graphs off and on (CUPTI busy share). PART=2: bench e2e --device cuda
# and run --verify on CUDA (P2 N2 against one rank, which now replays its steps).
# PART=3: TPOT of the three builds again, four requests one after the other (arrive_ms
# apart) per run, so that each run gives four samples; --profile off; then bench e2e
# again (E2E=1; the first had the upload area's bug, copying unused room every step).
# PART=4: model-deep with graphs unprofiled and profiled in one call (TPOT against the
# busy time CUPTI measures, and the device's idle time between steps), the default model
# profiled (idle between steps), and the default model on four ranks sharing the GPU (P4 N4,
# host collectives, no graphs: they have collectives) against one rank.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
t0=$SECONDS; lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
summ() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', sys.argv[2], {k: d.get(k) for k in ('ok','error','tpot_ms_p50','tpot_ms_mean','ttft_ms_p50')})" "$1" "$2" 2>/dev/null || echo "  $2: no json"; }
if [ "${PART:-1}" = 1 ]; then
  timeout 120 .devrun/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; grep -E "^(ok|FAIL)|recorded|FAIL" "$OUT/test_graphs.log" | head -20; lap graphs
  timeout 100 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"; grep FAIL "$OUT/test_kernels.log" | head; lap kernels
  timeout 40 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"; lap nccl
  printf '{"prompt_len": 64, "max_tokens": 64}\n' > "$OUT/req64.jsonl"
  for m in model-small default model-deep; do
    margs="--model examples/$m.json"; [ $m = default ] && margs=""
    common="run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $margs --requests $OUT/req64.jsonl --clients 1 --json"
    for v in old off on off-prof on-prof; do
      bin=.devrun/sparsecp; extra=""
      case $v in old) bin=.devrun/old/sparsecp;; off) extra=--no-cuda-graphs;; off-prof) extra="--no-cuda-graphs --profile";; on-prof) extra=--profile;; esac
      [ $m = model-deep ] && [ $v = off-prof ] && continue
      SPARSECP_LOG=info timeout 150 $bin $common $extra > "$OUT/$m-$v.json" 2> "$OUT/$m-$v.err"
      echo "$m $v rc=$?"; summ "$OUT/$m-$v.json" "$m $v"
      grep -h "steps recorded" "$OUT/$m-$v.err" | cut -c1-200
      case $v in *prof) grep -h "executor: rank 0: step" "$OUT/$m-$v.err" | sed -n '30,31p' | cut -c1-420;; esac
    done
    lap $m
  done
elif [ "${PART:-1}" = 4 ]; then
  m=model-deep
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 2500)) $i; done > "$OUT/req4-$m.jsonl"
  for v in on on-prof; do
    extra=""; [ $v = on-prof ] && extra=--profile
    SPARSECP_LOG=info timeout 200 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --model examples/$m.json --requests "$OUT/req4-$m.jsonl" --clients 1 --json $extra > "$OUT/$m-$v-x4.json" 2> "$OUT/$m-$v-x4.err"
    echo "$m $v x4 rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', sys.argv[2], d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/$m-$v-x4.json" "$m $v"
    [ $v = on-prof ] && grep -h "executor: rank 0: step" "$OUT/$m-$v-x4.err" | sed -n '30,31p' | cut -c1-460
    lap $m-$v
  done
  for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * 400)) $i; done > "$OUT/req4-default.jsonl"
  SPARSECP_LOG=info timeout 100 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --requests "$OUT/req4-default.jsonl" --clients 1 --json --profile > "$OUT/default-on-prof-x4.json" 2> "$OUT/default-on-prof-x4.err"
  echo "default on-prof x4 rc=$?"; grep -h "executor: rank 0: step" "$OUT/default-on-prof-x4.err" | sed -n '30,31p' | cut -c1-460
  for l in "1 1 nccl" "4 4 host"; do set -- $l
    timeout 150 .devrun/sparsecp run --device cuda --collectives $3 --gpus 1 --pcp $1 --dcp $2 --requests "$OUT/req4-default.jsonl" --clients 1 --json > "$OUT/default-p$1n$2.json" 2> "$OUT/default-p$1n$2.err"
    echo "default P$1 N$2 $3 rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'))" "$OUT/default-p$1n$2.json"
  done
  lap shared
elif [ "${PART:-1}" = 3 ]; then
  for m in model-small default model-deep; do
    margs="--model examples/$m.json"; [ $m = default ] && margs=""; gap=400; [ $m = model-deep ] && gap=2500
    for i in 0 1 2 3; do printf '{"prompt_len": 64, "max_tokens": 64, "arrive_ms": %d, "seed": %d}\n' $((i * gap)) $i; done > "$OUT/req4-$m.jsonl"
    for v in old off on; do
      bin=.devrun/sparsecp; extra=""
      case $v in old) bin=.devrun/old/sparsecp;; off) extra=--no-cuda-graphs;; esac
      SPARSECP_LOG=info timeout 200 $bin run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $margs --requests "$OUT/req4-$m.jsonl" --clients 1 --json $extra > "$OUT/$m-$v-x4.json" 2> "$OUT/$m-$v-x4.err"
      echo "$m $v x4 rc=$?"
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', sys.argv[2], d.get('error'), 'tpot p50', d.get('tpot_ms_p50'), 'p99', d.get('tpot_ms_p99'), 'ttft p50', d.get('ttft_ms_p50'))" "$OUT/$m-$v-x4.json" "$m $v" 2>/dev/null || echo "  no json"
      grep -h "steps recorded" "$OUT/$m-$v-x4.err" | cut -c1-200
    done
    lap $m
  done
  # the one-rank reference of --verify replays its decode steps (its log says so)
  SPARSECP_LOG=info timeout 90 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --json > "$OUT/verify-logged.json" 2> "$OUT/verify-logged.err"
  echo "verify (logged) rc=$?"; grep -h "steps recorded" "$OUT/verify-logged.err" | cut -c1-160
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), {k: {x: d[k][x] for x in ('identical','ties','mismatches') if x in d[k]} for k in ('verify','verify_cpu') if k in d})" "$OUT/verify-logged.json"
  [ "${E2E:-0}" = 1 ] && PART=2 E2E_ONLY=1 bash "$0"
else
  timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"; lap e2e
  grep -E "round|gpu_busy|TPOT|TTFT" "$OUT/bench-e2e-cuda.err" | head -30
  python3 - "$OUT/bench-e2e-cuda.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(f'{r["name"]:18s} {r["median"]:10.2f} {r["unit"]:4s}', {k: p[k] for k in ("kv", "context", "prompt_len") if k in p}, {k: r[k] for k in ("tpot_ms", "busy_ms", "span_ms", "ops", "busy_of_tpot") if k in r})
PY
  [ "${E2E_ONLY:-0}" = 1 ] && exit 0
  for kv in f32 bf16; do for m in examples/model-long.json ""; do
    f="$OUT/verify-$kv-$(basename "${m:-default}" .json)"
    timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify --json --quiet ${m:+--model $m} > "$f.json" 2> "$f.err"
    echo "verify $kv ${m:-default} rc=$?"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), {k: {x: d[k][x] for x in ('identical','ties','mismatches','first_mismatch') if x in d[k]} for k in ('verify','verify_cpu') if k in d})" "$f.json"
  done; done
  f="$OUT/verify-small-p2n1"
  timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 1 --model examples/model-small.json --requests tests/pipeline/stream.jsonl --token-budget 24 --verify --json --quiet > "$f.json" 2> "$f.err"
  echo "verify small P2 N1 rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), {k: {x: d[k][x] for x in ('identical','ties','mismatches','first_mismatch') if x in d[k]} for k in ('verify','verify_cpu') if k in d})" "$f.json"
  lap verify
fi
cd "$OUT" && tar czf all.tgz *.json *.err *.txt *.log 2>/dev/null; ls "$OUT" | head -50 > /dev/null
