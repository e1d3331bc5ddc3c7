#!/bin/bash
# What the device runs, by op (CUPTI records, logged by a profiled node at its end):
# decode at a 64-token context for the default model and model-deep, and one 32k prompt
# of model-long with bf16 rows (TTFT), P1 N1 on one GPU (NCCL). libcupti.so.13 is carried
# in .devrun/lib. The default model once more with SPARSECP_CUPTI_API=1: the host's CUDA
# runtime calls by time too (where a replayed step's 'prepare' goes). Outputs under $OUT.
# BIN: the binary. Ran once, 2026-12-03 09:01 UTC, with the binary of branch
# wip/device-ops-log over 15892e4 (the ops log, merged to main right after); outputs here.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
printf '{"prompt_len": 64, "max_tokens": 64}\n' > "$OUT/req64.jsonl"
printf '{"prompt_len": 32768, "max_tokens": 2}\n' > "$OUT/req32k.jsonl"
common="--device cuda --collectives nccl --gpus 1 --pcp 1 --dcp 1 --clients 1 --json --profile"
for m in default model-deep; do
  margs="--model examples/$m.json"; [ $m = default ] && margs=""
  SPARSECP_LOG=info timeout 150 ${BIN:-.devrun/sparsecp} run $common $margs --requests "$OUT/req64.jsonl" > "$OUT/$m.json" 2> "$OUT/$m.err"
  echo "$m rc=$?"
  grep -A26 "the device's kernels" "$OUT/$m.err" | cut -c1-170
done
SPARSECP_CUPTI_API=1 SPARSECP_LOG=info timeout 150 ${BIN:-.devrun/sparsecp} run $common --requests "$OUT/req64.jsonl" > "$OUT/default-api.json" 2> "$OUT/default-api.err"
echo "default (runtime calls) rc=$?"
grep -h "executor: rank 0: step" "$OUT/default-api.err" | sed -n '30,31p' | cut -c1-460
grep -A26 "the host's CUDA runtime calls" "$OUT/default-api.err" | cut -c1-170
SPARSECP_LOG=info timeout 120 ${BIN:-.devrun/sparsecp} run $common --model examples/model-long.json --kv-format bf16 --requests "$OUT/req32k.jsonl" --token-budget 32768 --max-model-len 32832 --num-blocks 2200 --deadline-ms 60000 > "$OUT/long32k-bf16.json" 2> "$OUT/long32k-bf16.err"
echo "long32k bf16 rc=$?"
grep "executor: rank 0: step" "$OUT/long32k-bf16.err" | tail -3 | cut -c1-400
grep -A26 "the device's kernels" "$OUT/long32k-bf16.err" | cut -c1-170

# decode at a 128k context (f32 rows): the step's indexer and top-K kernels by name
printf '{"prompt_len": 131072, "max_tokens": 33}\n' > "$OUT/req128k.jsonl"
SPARSECP_LOG=info timeout 150 ${BIN:-.devrun/sparsecp} run $common --model examples/model-long.json --requests "$OUT/req128k.jsonl" --token-budget 131072 --max-model-len 131200 --num-blocks 8400 --deadline-ms 120000 > "$OUT/long128k-f32.json" 2> "$OUT/long128k-f32.err"
echo "long128k f32 rc=$?"
grep "executor: rank 0: step" "$OUT/long128k-f32.err" | tail -2 | cut -c1-400
grep -A30 "the device's kernels" "$OUT/long128k-f32.err" | cut -c1-170
