#!/bin/bash
# run5.sh (session 51): where a decode step at 128k context spends what a 64-token one
# does not. Staged by build5.sh (.devrun/m: main with the cooperative select, sparsecp
# and gpu_bench_kernels). Call with carry [".devrun"]:
#  1. sparsecp run --profile, model-long over bf16 rows, P1 N1, one request of a 64-token
#     and then of a 131072-token prompt, 192 new tokens each, SPARSECP_LOG=info: the
#     executor's per-step stage times (the last decode steps printed) and, at shutdown,
#     the device's 25 costliest ops by CUPTI (count, total, mean);
#  2. kernel.indexer's one-token rows (f32 and bf16 keys, 32k and 128k), the cooperative
#     select and a launch a pass (SPARSECP_TOPK_COOP=0) alternating twice.
. bench/device_common.sh
B=.devrun/m
prof_run() { # CONTEXT TAG
  printf '{"prompt_len": %d, "max_tokens": 192, "seed": 7}\n' $1 > "$OUT/req-$2.jsonl"
  SPARSECP_LOG=info timeout 150 $B/sparsecp run --device cuda --pcp 1 --dcp 1 --profile \
    --model examples/model-long.json --kv-format bf16 --token-budget 131072 \
    --max-model-len 131392 --num-blocks 8400 --requests "$OUT/req-$2.jsonl" > "$OUT/prof-$2.log" 2>&1
  echo "profile $2 rc=$? $(grep -E 'tpot|TPOT' "$OUT/prof-$2.log" | head -2 | tr -s ' ' | cut -c1-200)"
  grep -E "rank 0: step" "$OUT/prof-$2.log" | tail -4 | sed 's/^.*rank 0/rank 0/' | cut -c1-330
  grep -E "cuda: +[0-9]" "$OUT/prof-$2.log" | head -26 | sed 's/^.*cuda:/cuda:/' | cut -c1-150
}
if has 1; then
  prof_run 64 c64
  prof_run 131072 c128k
  lap profile
fi
if has 2; then
  for r in 1 2; do
    indexer_env m coop$r SC_BENCH_INDEXER_TOKENS=1
    indexer_env m passes$r SC_BENCH_INDEXER_TOKENS=1 SPARSECP_TOPK_COOP=0
  done
  lap probes
fi
cd "$OUT" && tar czf all.tgz *.json *.jsonl *.log 2>/dev/null; rm -f *.json *.jsonl *.log *.err
