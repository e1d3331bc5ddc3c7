#!/bin/bash
# Fourth call (one memset for the select's state; --kv-format bf16; bench e2e with both KV
# formats): GPU tests, the indexer cases, bench e2e --device cuda, the per-step profile of
# a 32k prompt with bf16 KV, run --verify with bf16 KV. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
timeout 240 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL" "$OUT/test_kernels.log" | head -5
timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2>/dev/null; echo "kernels rc=$?"
timeout 400 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"
for f in kernels-indexer bench-e2e-cuda; do python3 - "$OUT/$f.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "kv", "context") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
done
printf '{"prompt_len": 32768, "max_tokens": 32}\n' > /tmp/req-32k.jsonl
SPARSECP_LOG=info timeout 200 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 \
  --profile --kv-format bf16 --model examples/model-long.json --requests /tmp/req-32k.jsonl \
  --token-budget 32768 --num-blocks 2176 --max-model-len 32864 --deadline-ms 120000 > "$OUT/profile-32768-bf16.log" 2>&1
echo "profile rc=$?"; grep "executor: rank 0: step" "$OUT/profile-32768-bf16.log" | sed -n '2,3p;31,32p'
for m in examples/model-long.json ""; do
  f="$OUT/verify-bf16-$(basename "${m:-default}" .json).log"
  timeout 200 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify ${m:+--model $m} > "$f" 2>&1
  echo "verify bf16 ${m:-default} rc=$?"; tail -2 "$f"
done
cd "$OUT" && tar czf all.tgz *.log *.json *.err gpu.txt
