#!/bin/bash
# run3.sh - session 43's third call: the fused tile with both halves' appends in one
# atomic round (HP 4), q's fragments loaded in the mma's operand order, and one barrier
# a tile fewer in the scoring kernel (the one after the cuts). test_gpu_kernels' indexer
# cases; kernel.indexer with SPARSECP_INDEXER_FEW 1 / 0 alternating twice (every shape:
# the barrier is every path's); bench e2e over bf16 rows; ncu of the full pass (fprof).
. bench/device_common.sh
B=.devrun/new
SC_GPU_CASES=indexer timeout 250 $B/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
echo "test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer.log" | cut -c1-200 | head -20
lap tests
for i in 1 2; do for f in 1 0; do
  SPARSECP_INDEXER_FEW=$f SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 $B/gpu_bench_kernels --json > "$OUT/idx-few$f-$i.json" 2> "$OUT/idx-few$f-$i.err"
  echo "indexer FEW=$f $i rc=$?"; show_indexer "$OUT/idx-few$f-$i.json"
done; done
lap indexer
timeout 200 $B/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-few1.json" 2> "$OUT/e2e-few1.err"
echo "e2e bf16 rc=$?"; show_e2e "$OUT/e2e-few1.json" | grep -v "launched\|one_at"
lap e2e
SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt NCU_SKIP=1 ncu_src fullpass fprof '_Z8k_idx_tcILi64ELi1ELb1ELb0E'
lap ncu
cd "$OUT" && tar czf all.tgz *.json *.log *.err *.txt *.csv.gz 2>/dev/null; rm -f *.json *.err test_*.log ncu-*.txt
