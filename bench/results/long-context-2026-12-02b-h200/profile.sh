#!/bin/bash
# Per-step stage times (docs/pipeline.md "Profiling steps") of one long prompt and its
# decode steps on one GPU: model-long, P = N = 1, NCCL. Usage: profile.sh CONTEXT OUTFILE
L=$1
printf '{"prompt_len": %d, "max_tokens": 32}\n' "$L" > /tmp/req-$L.jsonl
SPARSECP_LOG=info timeout 300 .devrun/sparsecp run --device cuda --collectives nccl --gpus 1 \
  --pcp 1 --dcp 1 --profile --model examples/model-long.json --requests /tmp/req-$L.jsonl \
  --token-budget "$L" --num-blocks $((L / 16 + 128)) --max-model-len $((L + 96)) --deadline-ms 120000 > "$2" 2>&1
echo "profile $L rc=$?"
grep "executor: rank 0: step" "$2" | tail -3
