#!/bin/bash
# The validation call of the tree of the commit that records it (710bd53's kernels): every
# GPU test, memcheck of the indexer cases, kernel.indexer, the PyTorch anchor, bench e2e
# --device cuda, run --verify with both KV formats on model-long and the default model.
# Timeouts sum to under the 600 s of one call. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
t0=$SECONDS; lap() { echo "  [$1: $((SECONDS - t0)) s]"; t0=$SECONDS; }
timeout 120 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"; lap tests
grep -E "FAIL" "$OUT/test_kernels.log" | head -8
timeout 40 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"; lap nccl
SC_GPU_CASES=indexer timeout 90 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$?"; lap memcheck
grep -h "ERROR SUMMARY" "$OUT"/memcheck-*.log
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2>/dev/null; echo "kernels rc=$?"; lap kernels
timeout 60 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"; lap anchor
cut -c1-110 "$OUT/torch-anchor.jsonl"
timeout 120 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"; lap e2e
for f in kernels-indexer bench-e2e-cuda; do python3 - "$OUT/$f.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "kv", "context") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
done
for kv in f32 bf16; do for m in examples/model-long.json ""; do
  f="$OUT/verify-$kv-$(basename "${m:-default}" .json).log"
  timeout 45 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify ${m:+--model $m} > "$f" 2>&1
  echo "verify $kv ${m:-default} rc=$? $(tail -1 "$f")"; lap verify
done; done
cd "$OUT" && tar czf all.tgz *.log *.json *.jsonl *.err *.txt
