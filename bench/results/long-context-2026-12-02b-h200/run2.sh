#!/bin/bash
# Second call (the cache key list built on the GPU): GPU tests with memcheck on the
# indexer and key-list cases, the indexer cases, bench e2e new and before (35eb4cd), the
# per-step profile at 32k and 128k, run --verify. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
[ -f .devrun/base/sparsecp.xz ] && xz -d .devrun/base/*.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
d=bench/results/long-context-2026-12-02b-h200
step() { echo "== $1 ($(date -u +%T))"; }
step tests
timeout 240 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$?"
grep -E "FAIL|cache keys" "$OUT/test_kernels.log" | head; grep -c "^ok" "$OUT/test_kernels.log"
SC_GPU_CASES=indexer timeout 200 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$?"
SC_GPU_CASES=cache_keys timeout 100 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-cache-keys.log" 2>&1; echo "memcheck cache_keys rc=$?"
grep -h "ERROR SUMMARY" "$OUT"/memcheck-*.log
step kernels
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2>/dev/null; echo "rc=$?"
step e2e
timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "rc=$?"
step base-e2e
timeout 300 .devrun/base/sparsecp bench e2e --device cuda --json > "$OUT/base-bench-e2e-cuda.json" 2> "$OUT/base-bench-e2e-cuda.err"; echo "rc=$?"
for f in kernels-indexer bench-e2e-cuda base-bench-e2e-cuda; do python3 - "$OUT/$f.json" "$f" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(sys.argv[2], r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "context") if k in p}, round(r["median"], 3), r["unit"])
PY
done
step profile
bash $d/profile.sh 32768 "$OUT/profile-32768.log"
bash $d/profile.sh 131072 "$OUT/profile-131072.log"
step verify
for m in examples/model-long.json ""; do
  f="$OUT/verify-$(basename "${m:-default}" .json).log"
  timeout 200 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify ${m:+--model $m} > "$f" 2>&1
  echo "verify ${m:-default} rc=$?"; tail -1 "$f"
done
step end
cd "$OUT" && tar czf all.tgz *.log *.json *.err gpu.txt
