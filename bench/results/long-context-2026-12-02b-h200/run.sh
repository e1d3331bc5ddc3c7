#!/bin/bash
# One call on the GPU machine (issue 18, 2026-12-02, fourteenth session): the GPU tests,
# the indexer kernel cases, the PyTorch anchor, `bench e2e --device cuda`, and the
# single-rank equivalence of `run --verify` on model-long. Outputs under $OUT.
# Stage: .devrun/ holds sparsecp, test_gpu_kernels, gpu_bench_kernels, test_gpu_nccl and
# their libraries (libopenblas xz-compressed to fit the carry).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
[ -f .devrun/base/sparsecp.xz ] && xz -d .devrun/base/*.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"
date -u >> "$OUT/gpu.txt"
step() { echo "== $1 ($(date -u +%T))"; }
step tests
timeout 240 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$?"
grep -E "FAIL|indexer|merge" "$OUT/test_kernels.log" | head -30
[ "${SC_PHASE:-all}" = tests ] && exit 0
step kernels
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json \
  > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"; echo "rc=$?"
python3 - "$OUT/kernels-indexer.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["name"], {k: r["params"][k] for k in ("phase", "tokens", "index_heads", "keys") if k in r["params"]}, round(r["median"], 1), r["unit"])
PY
step anchor
timeout 200 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "rc=$?"
cut -c1-160 "$OUT/torch-anchor.jsonl"
step e2e
timeout 400 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"
echo "rc=$?"; tail -3 "$OUT/bench-e2e-cuda.err"
python3 - "$OUT/bench-e2e-cuda.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["name"], r["params"].get("context"), round(r["median"], 3), r["unit"])
PY
step verify
for m in examples/model-long.json ""; do
  timeout 200 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --verify ${m:+--model $m} \
    > "$OUT/verify-$(basename "${m:-default}" .json).log" 2>&1
  echo "verify ${m:-default} rc=$?"; tail -2 "$OUT/verify-$(basename "${m:-default}" .json).log"
done
# the same benchmarks with the binaries of the commit before (35eb4cd), in this call
if [ -x .devrun/base/sparsecp ]; then
  step base-kernels
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/base/gpu_bench_kernels --json \
    > "$OUT/base-kernels-indexer.json" 2>/dev/null; echo "rc=$?"
  step base-e2e
  timeout 400 .devrun/base/sparsecp bench e2e --device cuda --json > "$OUT/base-bench-e2e-cuda.json" 2> "$OUT/base-bench-e2e-cuda.err"
  echo "rc=$?"
  for f in base-kernels-indexer base-bench-e2e-cuda; do python3 - "$OUT/$f.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    print(r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys", "context") if k in p}, round(r["median"], 3), r["unit"])
PY
  done
fi
step end
