#!/bin/bash
# run8.sh (session 46, call B, on the machine run7.sh left warm; same staging): parts
#  1. compute-sanitizer memcheck of next's indexer cases;
#  2. bench e2e over bf16 rows with csel's sparsecp, its select in clusters and with
#     SPARSECP_TOPK_CLUSTER=0 (five rounds a case: TTFT 32k / 128k, the TPOT ratios);
#  3. bench e2e over bf16 rows with next's sparsecp.
. bench/device_common.sh
if has 1; then
  for v in next; do
    SC_GPU_CASES=indexer timeout ${MC_T:-150} compute-sanitizer --tool memcheck .devrun/$v/test_gpu_kernels > "$OUT/memcheck-$v.log" 2>&1
    echo "memcheck indexer $v rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-$v.log") $(grep -c '^ok' "$OUT/memcheck-$v.log") ok"
  done
  lap memcheck
fi
if has 2; then
  for tag in csel pass; do
    env $([ $tag = pass ] && echo SPARSECP_TOPK_CLUSTER=0) timeout 150 .devrun/csel/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$tag.json" 2> "$OUT/e2e-$tag.err"
    echo "e2e bf16 $tag rc=$?"; show_e2e "$OUT/e2e-$tag.json" | grep -v "launched\|one_at"
  done
  lap e2e
fi
if has 3; then
  timeout 150 .devrun/next/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-next.json" 2> "$OUT/e2e-next.err"
  echo "e2e bf16 next rc=$?"; show_e2e "$OUT/e2e-next.json" | grep -v "launched\|one_at"
  lap e2e-next
fi
cd "$OUT" && tar czf all8.tgz *.json *.log *.err 2>/dev/null; rm -f *.json *.log *.err
