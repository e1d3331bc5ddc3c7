#!/bin/bash
# run --verify on the GPU against one rank on the same GPU and against the CPU reference
# (f32 and bf16 rows, model-long and the default model, P2 N2 sharing GPU 0; the small
# model's stream at P4 N4 and at P2 N1), then bench e2e --device cuda (the loop's extra
# turn after a spin, actors/runtime/sc_loop.c, on TPOT). Outputs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
for kv in f32 bf16; do for m in examples/model-long.json ""; do
  f="$OUT/verify-$kv-$(basename "${m:-default}" .json)"
  timeout 60 .devrun/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format $kv --verify --json --quiet ${m:+--model $m} > "$f.json" 2> "$f.err"
  echo "verify $kv ${m:-default} rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), {k: {x: d[k][x] for x in ('identical','ties','mismatches','first_mismatch') if x in d[k]} for k in ('verify','verify_cpu') if k in d})" "$f.json"
done; done
for l in "4 4" "2 1"; do set -- $l
  f="$OUT/verify-small-p$1n$2"
  timeout 60 .devrun/sparsecp run --device cuda --pcp $1 --dcp $2 --model examples/model-small.json --requests tests/pipeline/stream.jsonl --token-budget 24 --verify --json --quiet > "$f.json" 2> "$f.err"
  echo "verify small P$1 N$2 rc=$?"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ', d.get('error'), {k: {x: d[k][x] for x in ('identical','ties','mismatches','first_mismatch') if x in d[k]} for k in ('verify','verify_cpu') if k in d})" "$f.json"
done
timeout 120 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"
grep -E "round 1" "$OUT/bench-e2e-cuda.err"
cd "$OUT" && tar czf all.tgz *.json *.err *.txt
