#!/bin/bash
# run4.sh - floors2 against main (binaries: build4.sh; carry [".devrun"]; ~6 minutes):
# floors2's indexer cases; kernel.indexer of main, floors2 without floors (the
# transposed fold alone), floors2 (its rule: S = 32 at K = 2048) and floors2 at S = 8,
# alternating twice; bench e2e over bf16 rows of main and floors2; run --verify at P2 N2
# over bf16 rows: the default model (4 index heads: the fold in decode and prefill) and
# model-long with two 8k prompts in one step (the floors on both sides).
. bench/device_common.sh
B=.devrun/floors2
SC_GPU_CASES=indexer timeout 200 $B/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
echo "indexer cases rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"
grep -E "FAIL|not ok|bounded" "$OUT/test_indexer.log" | cut -c1-220 | head -12
lap tests
for i in 1 2; do for v in main:1 floors2:0 floors2:1 floors2:8; do
  b=${v%:*} f=${v#*:}
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 .devrun/$b/gpu_bench_kernels --json > "$OUT/indexer-$b-$f-$i.json" 2> "$OUT/indexer-$b-$f-$i.err"
  echo "indexer $b floors=$f $i rc=$?"; show_indexer "$OUT/indexer-$b-$f-$i.json" | grep "'index_heads': 4"
done; done
lap indexer
for b in main floors2; do
  timeout 200 .devrun/$b/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$b.json" 2> "$OUT/e2e-$b.err"
  echo "e2e bf16 $b rc=$?"; show_e2e "$OUT/e2e-$b.json"
done
lap e2e
timeout 150 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify > "$OUT/verify-default.log" 2>&1
echo "verify P2 N2 default bf16 rc=$? $(grep -E 'verify|error' "$OUT/verify-default.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 200 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1100 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
