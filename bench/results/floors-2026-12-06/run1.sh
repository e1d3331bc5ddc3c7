#!/bin/bash
# run1.sh - the floors call (binaries: build.sh; carry [".devrun"]; ~5 minutes): the
# indexer cases of test_gpu_kernels (the bounded prompt takes the floors, the periodic
# keys the repair), kernel.indexer with SPARSECP_INDEXER_FLOORS=0 (main's indexer) and 1
# alternating twice, bench e2e over bf16 rows with each, and run --verify of model-long
# at P2 N2 over bf16 rows with two 8k prompts in one step (both sides take the floors).
. bench/device_common.sh
B=.devrun/floors
SC_GPU_CASES=indexer timeout 200 $B/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
echo "indexer cases rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"
grep -E "FAIL|not ok|bounded" "$OUT/test_indexer.log" | cut -c1-220 | head -12
lap tests
for i in 1 2; do for f in 0 1; do
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 $B/gpu_bench_kernels --json > "$OUT/indexer-f$f-$i.json" 2> "$OUT/indexer-f$f-$i.err"
  echo "indexer floors=$f $i rc=$?"; show_indexer "$OUT/indexer-f$f-$i.json"
done; done
lap indexer
for f in 0 1; do
  SPARSECP_INDEXER_FLOORS=$f timeout 200 $B/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-f$f.json" 2> "$OUT/e2e-f$f.err"
  echo "e2e bf16 floors=$f rc=$?"; show_e2e "$OUT/e2e-f$f.json"
done
lap e2e
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 200 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
