#!/bin/bash
# run4.sh (session 47, the last call's budget): run3.sh's parts reordered to fit ~330 s,
# the indexer cases run once, under compute-sanitizer memcheck (which prints their ok
# lines as well: as long as a plain run, 124 s for next's in c2):
#  1. fin's indexer cases under memcheck; 2. the one-token decode shapes fin / m twice,
#  the whole kernel.indexer once each; 3. e2e bf16 fin then m; 4. verify P2 N2 of
#  model-long, two 8k prompts (fin); 5. fin's test_gpu_graphs, test_gpu_nccl and
#  test_gpu_ipc under MPS; 6. m's kernel.indexer with the group capped at 4 and 8, and
#  without the dense path.
. bench/device_common.sh
if has 1; then
  SC_GPU_CASES=indexer timeout ${MC_T:-150} compute-sanitizer --tool memcheck .devrun/fin/test_gpu_kernels > "$OUT/memcheck-fin.log" 2>&1
  echo "memcheck indexer fin rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-fin.log") $(grep -c '^ok' "$OUT/memcheck-fin.log") ok"
  grep -E "FAIL|not ok|distinct=1:" "$OUT/memcheck-fin.log" | cut -c1-200 | head
  lap memcheck-cases
fi
if has 2; then
  for i in 1 2; do
    SC_BENCH_INDEXER_TOKENS=1 indexer_env fin fin1-$i
    SC_BENCH_INDEXER_TOKENS=1 indexer_env m m1-$i
  done
  indexer_env fin fin; indexer_env m m
  lap bench
fi
if has 3; then
  for v in fin m; do
    timeout 100 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v.json" 2> "$OUT/e2e-$v.err"
    echo "e2e bf16 $v rc=$?"; show_e2e "$OUT/e2e-$v.json" | grep -v "launched\|one_at\|gemm"
  done
  lap e2e
fi
if has 4; then
  BIN=.devrun/fin verify_long8k
  lap verify
fi
if has 5; then
  timeout 100 .devrun/fin/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$? $(tail -1 "$OUT/test_graphs.log")"
  timeout 100 .devrun/fin/test_gpu_nccl > "$OUT/test_nccl.log" 2>&1; echo "test_gpu_nccl rc=$? $(tail -1 "$OUT/test_nccl.log")"
  ipc_test_mps .devrun/fin/test_gpu_ipc | tail -3
  lap tests
fi
if has 6; then
  indexer_env m g4 SPARSECP_INDEXER_GROUP=4
  indexer_env m g8 SPARSECP_INDEXER_GROUP=8
  indexer_env m nodense SPARSECP_INDEXER_DENSE=0
  lap probes
fi
cd "$OUT" && tar czf all4.tgz *.json *.log *.err 2>/dev/null; rm -f *.json *.log *.err
