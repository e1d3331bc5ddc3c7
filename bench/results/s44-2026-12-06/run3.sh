#!/bin/bash
# run3.sh (session 44; prepared, not run: too little device time was left to start a
# machine): .devrun/s2 as in run2.sh (build2.sh).
#  1. the indexer cases of test_gpu_kernels (the new 64-head floors cases among them);
#  2. kernel.indexer with floors off (0) and at the rule (1);
#  3. run --verify P2 N2, default model, f32 rows;
#  4. bench e2e over bf16 rows.
. bench/device_common.sh
B=.devrun/s2
SC_GPU_CASES=indexer timeout 125 $B/test_gpu_kernels > "$OUT/test-idx.log" 2>&1
echo "indexer cases rc=$? $(grep -c '^ok' "$OUT/test-idx.log") ok"; grep -E "FAIL|not ok" "$OUT/test-idx.log" | cut -c1-200 | head -5
grep -h "heads=64 dim=128 topk=256 tokens=1100\|^ok" "$OUT/test-idx.log" | cut -c1-200
lap tests
for S in 0 1; do
  SPARSECP_INDEXER_FLOORS=$S SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 30 $B/gpu_bench_kernels --json > "$OUT/flo-$S.json" 2> /dev/null
  echo "floors S=$S rc=$?"; show_indexer "$OUT/flo-$S.json"
done
lap bench
timeout 30 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --verify > "$OUT/verify.log" 2>&1; echo "verify P2 N2 rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
timeout 40 $B/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-s2.json" 2> "$OUT/e2e-s2.err"
echo "e2e bf16 s2 rc=$?"; show_e2e "$OUT/e2e-s2.json" | grep -v "launched\|one_at"
lap rest
cd "$OUT" && tar czf all3.tgz *.json *.log 2>/dev/null; rm -f *.json *.log *.err
