#!/bin/bash
# run2.sh (session 44; prepared, not run: no machine could be started; build2.sh stages
# it): .devrun/s2 = main 3e62768 + team_cut_edge with one shared atomic a key
# (cut-atomics.patch) + sampled floors for tokens of many products (64 x 128: S up to
# 64; SPARSECP_INDEXER_FLOORS=S reaches every shape) + three 64-head floors cases in
# test_gpu_kernels + SPARSECP_INDEXER_GROUP; .devrun/new = main 3e62768 (the base);
# .devrun/dpos = s2 + dense-pos.patch.
#  1. kernel.indexer of s2 with floors off (0), at the rule (1), at S = 128, and at the
#     rule with groups of up to 4 tokens whatever the token count (g4), twice;
#  2. s2's test_gpu_kernels (all cases) and test_gpu_graphs;
#  3. run --verify P2 N2: the default model over f32 and bf16 rows, model-long with two
#     8k prompts (bf16 rows; the cache sized for them);
#  4. ncu: each kernel of model-long's one decode token over 128k keys (s2);
#  5. bench e2e over bf16 rows, base then s2;
#  6. compute-sanitizer memcheck of s2's indexer cases;
#  7. dense-pos.patch (.devrun/dpos: the dense select's positions loaded beside its words)
#     against s2, kernel.indexer alternating twice, and its indexer cases.
. bench/device_common.sh
B=.devrun/s2
if has 1; then
for i in 1 2; do for S in 0 1 128 g4; do
  if [ $S = g4 ]; then G=4 F=1; else G=0 F=$S; fi
  SPARSECP_INDEXER_GROUP=$G SPARSECP_INDEXER_FLOORS=$F SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 $B/gpu_bench_kernels --json > "$OUT/flo-$S-$i.json" 2> /dev/null
  echo "floors S=$S pass $i rc=$?"; show_indexer "$OUT/flo-$S-$i.json"
done; done
lap bench
fi
if has 2; then
  timeout 200 $B/test_gpu_kernels > "$OUT/test-kernels.log" 2>&1
  echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test-kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test-kernels.log" | cut -c1-200 | head -5
  timeout 100 $B/test_gpu_graphs > "$OUT/test-graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test-graphs.log")"
  grep -h "heads=64 dim=128 topk=256 tokens=1100" "$OUT/test-kernels.log" | cut -c1-200
  lap tests
fi
if has 3; then
  for fmt in "" "--kv-format bf16"; do
    timeout 100 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify $fmt > "$OUT/verify.log" 2>&1; echo "verify P2 N2 $fmt rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  done
  for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
  timeout 150 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1024 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
  echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
  lap verify
fi
if has 4; then
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=1 SC_BENCH_INDEXER_KEYS=131072 \
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum -k 'regex:k_idx|k_rsel|k_topk' \
    --launch-skip 45 --launch-count 18 $B/gpu_bench_kernels --json > "$OUT/ncu-decode128k.log" 2>&1
  echo "ncu decode 128k rc=$?"
  grep -E "^  [A-Za-z_].*\(|gpu__time_duration" "$OUT/ncu-decode128k.log" | sed 's/(sc_indexer_args.*)//' | cut -c1-90 | paste - - | awk '{print $1, $2, $(NF)}' | head -20
  lap ncu
fi
if has 5; then
  for i in 1; do for v in new s2; do
    timeout 100 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v-$i.json" 2> "$OUT/e2e-$v-$i.err"
    echo "e2e bf16 $v $i rc=$?"; show_e2e "$OUT/e2e-$v-$i.json" | grep -v "launched\|one_at"
  done; done
  lap e2e
fi
if has 6; then
  SC_GPU_CASES=indexer timeout ${MC_T:-150} compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1
  echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log") $(grep -c '^ok' "$OUT/memcheck-indexer.log") ok"
  lap memcheck
fi
if has 7; then
  for i in 1 2; do for v in s2 dpos; do
    SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/dpos-$v-$i.json" 2> /dev/null
    echo "indexer $v $i rc=$?"; show_indexer "$OUT/dpos-$v-$i.json" | grep "'tokens': 128"
  done; done
  SC_GPU_CASES=indexer timeout 150 .devrun/dpos/test_gpu_kernels > "$OUT/test-dpos.log" 2>&1
  echo "dpos indexer cases rc=$? $(grep -c '^ok' "$OUT/test-dpos.log") ok"; grep -E "FAIL|not ok" "$OUT/test-dpos.log" | head -5
  lap dpos
fi
cd "$OUT" && tar czf all2.tgz *.json *.log 2>/dev/null; rm -f *.json *.log *.err
