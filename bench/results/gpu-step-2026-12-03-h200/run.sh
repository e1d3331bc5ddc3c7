#!/bin/bash
# Issue 20 item 1: what the device ran of a step (CUPTI activity records, the executor's
# "busy" of --profile): decode at a 64-token context, P1 N1 on one GPU (NCCL), for
# model-deep and the default model; bench e2e --device cuda with its new e2e.gpu_busy
# case; the GPU tests. libcupti.so.13 is carried in .devrun/lib. Outputs under $OUT.
# Call 1 ran all of it (its bench e2e stopped at the new case: the profiled cluster had
# no taps, fixed since); call 2 ran only the bench e2e line, with the fix.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
t0=$SECONDS; lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
timeout 90 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"; lap tests
timeout 40 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"; lap nccl
printf '{"prompt_len": 64, "max_tokens": 64}\n' > "$OUT/req64.jsonl"
for m in model-deep default; do
  margs="--model examples/$m.json"; [ $m = default ] && margs=""
  SPARSECP_LOG=info timeout 150 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 $margs --requests "$OUT/req64.jsonl" --clients 1 --json --profile > "$OUT/$m-prof.json" 2> "$OUT/$m-prof.err"
  echo "$m --profile rc=$?"; lap $m
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', {k: d.get(k) for k in ('ok','error','tpot_ms_p50','ttft_ms_p50')})" "$OUT/$m-prof.json"
  grep -h "executor: rank 0: step" "$OUT/$m-prof.err" | sed -n '30,32p' | cut -c1-400
done
timeout 150 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"; lap e2e
grep -E "round 1|gpu_busy" "$OUT/bench-e2e-cuda.err"
python3 - "$OUT/bench-e2e-cuda.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["name"] == "e2e.gpu_busy": print(r["params"]["kv"], round(r["median"], 1), "%", {k: r[k] for k in ("tpot_ms", "busy_ms", "span_ms", "ops", "busy_of_tpot")})
PY
cd "$OUT" && tar czf all.tgz *.json *.err *.txt *.log
