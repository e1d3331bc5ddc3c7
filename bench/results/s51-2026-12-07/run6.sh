#!/bin/bash
# run6.sh (session 51): what a decode token's indexer op over 128k keys is made of now
# (the cooperative select merged), by ncu's kernel durations: kernel.indexer's one-token
# rows over 131072 keys (f32, then bf16 keys), the select cooperative and a launch a
# pass (SPARSECP_TOPK_COOP=0); and the host's CUDA calls of a 64-token context's decode
# steps (SPARSECP_CUPTI_API=1; issue 20: a step's 0.2 ms "prepare"). Staged by build5.sh.
. bench/device_common.sh
B=.devrun/m
if has 1; then
  for v in 1 0; do
    SPARSECP_TOPK_COOP=$v SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072 \
      timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum -k 'regex:k_idx|k_rsel|k_topk|k_cache' \
      --launch-count 120 $B/gpu_bench_kernels --json > "$OUT/ncu-coop$v.log" 2>&1
    echo "ncu coop=$v rc=$?"
    grep -E "^  [A-Za-z_].*\(|gpu__time_duration" "$OUT/ncu-coop$v.log" | sed 's/(sc_indexer_args.*)//' | cut -c1-60 | paste - - | awk '{print $1, $2, $(NF)}' | tail -16
  done
  lap ncu
fi
if has 2; then
  printf '{"prompt_len": 64, "max_tokens": 192, "seed": 7}\n' > "$OUT/req-c64.jsonl"
  SPARSECP_CUPTI_API=1 SPARSECP_LOG=info timeout 150 $B/sparsecp run --device cuda --pcp 1 --dcp 1 --profile \
    --model examples/model-long.json --kv-format bf16 --token-budget 4096 \
    --max-model-len 1024 --num-blocks 256 --requests "$OUT/req-c64.jsonl" > "$OUT/api-c64.log" 2>&1
  echo "api c64 rc=$?"
  grep -E "rank 0: step" "$OUT/api-c64.log" | tail -2 | sed 's/^.*rank 0/rank 0/' | cut -c1-330
  grep -E "cuda: +[0-9]" "$OUT/api-c64.log" | tail -25 | sed 's/^.*cuda:/cuda:/' | cut -c1-150
  lap api
fi
cd "$OUT" && tar czf all.tgz *.jsonl *.log 2>/dev/null; rm -f *.json *.jsonl *.log *.err
