#!/bin/bash
# Eighth call (the indexer with 8 warps a block): GPU tests, memcheck of the indexer and
# attention cases, the kernel cases of model-long's attention and of the indexer, bench
# e2e --device cuda with both KV formats, run --verify with both on model-long and the
# default model. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
timeout 240 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL|attn fmt=1 tok=[23] heads=(8|64) dc=512" "$OUT/test_kernels.log" | head -8
timeout 60 .devrun/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$?"
SC_GPU_CASES=indexer timeout 200 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1; echo "memcheck indexer rc=$?"
SC_GPU_CASES=attention timeout 150 compute-sanitizer --tool memcheck .devrun/test_gpu_kernels > "$OUT/memcheck-attention.log" 2>&1; echo "memcheck attention rc=$?"
grep -h "ERROR SUMMARY" "$OUT"/memcheck-*.log
for k in kernel.sparse_attn kernel.indexer; do
  SC_BENCH_KERNELS_ONLY=$k timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-$k.json" 2>/dev/null; echo "kernels $k rc=$?"
done
timeout 200 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-110 "$OUT/torch-anchor.jsonl"
timeout 400 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"
for f in kernels-kernel.sparse_attn kernels-kernel.indexer bench-e2e-cuda; do python3 - "$OUT/$f.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(r["name"], {k: p[k] for k in ("phase", "tokens", "heads", "index_heads", "keys", "kv", "context", "q_per_request") if k in p}, round(r["median"], 3), r["unit"], r.get("ratio_to_short_context", ""))
PY
done
for kv in f32 bf16; do for m in examples/model-long.json ""; do
  f="$OUT/verify-$kv-$(basename "${m:-default}" .json).log"
  timeout 200 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify ${m:+--model $m} > "$f" 2>&1
  echo "verify $kv ${m:-default} rc=$? $(tail -1 "$f")"; grep "verify (single" "$f"
done; done
cd "$OUT" && tar czf all.tgz *.log *.json *.jsonl *.err gpu.txt
