#!/bin/bash
# run.sh - session 43: the few-heads tile scored and appended in one go
# (cuda_indexer_few.cuh) against the same binary with SPARSECP_INDEXER_FEW=0 (the sums
# through shared memory, tc_append), one call (binaries of the working tree in
# .devrun/new: sparsecp, test_gpu_kernels, gpu_bench_kernels). PART 1: the indexer cases
# of test_gpu_kernels with the path on and off, then kernel.indexer with FEW 1 / 0
# alternating twice; PART 2: bench e2e over bf16 rows (model-long's TTFT at 32k, 128k)
# FEW 1 / 0; PART 3: compute-sanitizer memcheck of the indexer cases.
. bench/device_common.sh
B=.devrun/new
if has 1; then
  for f in 1 0; do
    SPARSECP_INDEXER_FEW=$f SC_GPU_CASES=indexer timeout 200 $B/test_gpu_kernels > "$OUT/test_indexer_few$f.log" 2>&1
    echo "test_gpu_kernels indexer FEW=$f rc=$? $(grep -c '^ok' "$OUT/test_indexer_few$f.log") ok"
    grep -E "FAIL|not ok" "$OUT/test_indexer_few$f.log" | cut -c1-200 | head -20
  done
  lap tests
  for i in 1 2; do for f in 1 0; do
    SPARSECP_INDEXER_FEW=$f SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 150 $B/gpu_bench_kernels --json > "$OUT/idx-few$f-$i.json" 2> "$OUT/idx-few$f-$i.err"
    echo "indexer FEW=$f $i rc=$?"; show_indexer "$OUT/idx-few$f-$i.json" | grep "'index_heads': 4"
  done; done
  lap indexer
fi
if has 2; then
  for f in 1 0; do
    SPARSECP_INDEXER_FEW=$f timeout 200 $B/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-few$f.json" 2> "$OUT/e2e-few$f.err"
    echo "e2e bf16 FEW=$f rc=$?"; show_e2e "$OUT/e2e-few$f.json" | grep -v "launched\|one_at"
  done
  lap e2e
fi
if has 3; then
  SC_GPU_CASES=indexer timeout 300 compute-sanitizer --tool memcheck $B/test_gpu_kernels > "$OUT/memcheck-indexer.log" 2>&1
  echo "memcheck indexer rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer.log")"
  lap memcheck
fi
cd "$OUT" && tar czf all.tgz *.json *.log *.err 2>/dev/null; rm -f *.json *.err test_*.log
