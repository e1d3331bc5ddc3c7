#!/bin/bash
# run5.sh - session 43's validation of the final tree (.devrun/new) in what device time
# was left after two failed starts (a fuller validation could not start; c3 ran the final tree's indexer
# cases): the indexer cases under memcheck, run --verify at P2 N2 over f32 and bf16 rows
# (the default model: 4 index heads, the fused tile) and of model-long with two 8k
# prompts (the floors and the fused tile on both sides), test_gpu_graphs.
. bench/device_common.sh
B=.devrun/new
SC_GPU_CASES=indexer timeout 130 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1
echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log") $(grep -c '^ok' "$OUT/memcheck-indexer.log") ok"
lap memcheck
for fmt in "" "--kv-format bf16"; do
  timeout 60 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 90 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
timeout 60 $B/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
lap graphs
cd "$OUT" && tar czf all.tgz *.log 2>/dev/null; rm -f *.log
