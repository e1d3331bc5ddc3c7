#!/bin/bash
# Call 1 (the indexer with candidate lists in global memory and warp cuts): the indexer's
# GPU test cases, kernel.indexer of this tree and of c48a163 (.devrun/base), the PyTorch
# anchor, bench e2e --device cuda. SC_IDX_GROUP: an experiment binary's cap on tokens a block. Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
for f in .devrun/base/*.xz; do [ -f "$f" ] && xz -d "$f"; done
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
SC_GPU_CASES=indexer timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels indexer rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL|error" "$OUT/test_kernels.log" | head -8
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2>"$OUT/kernels-indexer.err"; echo "kernels new rc=$?"
for g in 8 16; do SC_IDX_GROUP=$g SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer-g$g.json" 2>/dev/null; echo "kernels g$g rc=$?"; done
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/base/gpu_bench_kernels --json > "$OUT/base-kernels-indexer.json" 2>/dev/null; echo "kernels base rc=$?"
timeout 200 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-110 "$OUT/torch-anchor.jsonl"
for f in base-kernels-indexer kernels-indexer kernels-indexer-g8 kernels-indexer-g16; do echo "== $f"; python3 - "$OUT/$f.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(r["name"], {k: p[k] for k in ("phase", "tokens", "heads", "index_heads", "keys", "kv", "context") if k in p}, round(r["median"], 3), r["unit"])
PY
done
timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"
grep -E "ttft|tpot" "$OUT/bench-e2e-cuda.err" | grep "round 1" | head -20
cd "$OUT" && tar czf all.tgz *.log *.json *.jsonl *.err gpu.txt
