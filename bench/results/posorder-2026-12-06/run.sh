#!/bin/bash
# run.sh - session 40's call (binaries: build.sh; carry [".devrun"]:
# export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~8 minutes: posorder's whole
# test_gpu_kernels and test_gpu_graphs, memcheck of its indexer and top-K cases, run
# --verify at P2 N2 (the default model over f32 and bf16 rows; model-long with two 8k
# prompts over bf16 rows: the DCP merge and workspace paths at K = 2048), kernel.indexer
# of main and posorder alternating twice, bench e2e over bf16 rows alternating twice,
# and posorder's 32k prompt as one step under --profile (where its TTFT goes).
. bench/device_common.sh
P=.devrun/posorder
timeout 240 $P/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head
timeout 150 $P/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
for c in indexer topk; do
  SC_GPU_CASES=$c timeout 200 compute-sanitizer --tool memcheck $P/test_gpu_kernels > "$OUT/memcheck-$c.log" 2>&1
  echo "memcheck $c rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$c.log")"
done
lap checks
for fmt in f32 bf16; do
  timeout 150 $P/sparsecp run --device cuda --pcp 2 --dcp 2 --verify --kv-format $fmt > "$OUT/verify-$fmt.log" 2>&1
  echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify-$fmt.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 200 $P/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1100 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
indexer_alternating "main posorder"
lap indexer
for r in 1 2; do for v in main posorder; do
  timeout 100 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v-$r.json" 2> "$OUT/e2e-$v-$r.err"
  echo "e2e bf16 $v $r rc=$?"; show_e2e "$OUT/e2e-$v-$r.json" | grep -v "launched\|one_at"
done; done
lap e2e
printf '{"prompt_len": 32768, "max_tokens": 2, "arrive_ms": 0, "seed": 1}\n' > "$OUT/long.jsonl"
SPARSECP_LOG=info timeout 120 $P/sparsecp run --device cuda --pcp 1 --dcp 1 --clients 1 \
  --model examples/model-long.json --kv-format bf16 --token-budget 32768 --max-model-len 32800 \
  --num-blocks 2100 --requests "$OUT/long.jsonl" --profile --json > "$OUT/prof-long.json" 2> "$OUT/prof-long.err"
echo "profiled 32k prompt, one step rc=$?"; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' ttft', d.get('ttft_ms_p50'), d.get('error'))" "$OUT/prof-long.json"
grep -A24 "by time" "$OUT/prof-long.err" | cut -c1-160 | head -26
grep -iE "stage" "$OUT/prof-long.err" | head -4 | cut -c1-250
lap profile
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
