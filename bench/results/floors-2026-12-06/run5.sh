#!/bin/bash
# run5.sh - the merged tree (ac8c4ff, its binaries in .devrun/, main before the merge in
# .devrun/main/: build4.sh's; carry [".devrun"]; ~6 minutes): all of test_gpu_kernels and
# test_gpu_graphs, the indexer cases under compute-sanitizer's memcheck, and bench e2e
# over bf16 rows of the tree before and the merged one alternating twice (run4's TPOT at
# 32k context was 0.329 ms against 0.288: whether that was the merge or the run).
. bench/device_common.sh
gpu_tests
lap tests
memcheck_indexer
lap memcheck
for i in 1 2; do for v in main new; do
  timeout 200 "$(bin_of sparsecp $v)" bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$v-$i.json" 2> "$OUT/e2e-$v-$i.err"
  echo "e2e bf16 $v $i rc=$?"; show_e2e "$OUT/e2e-$v-$i.json" | grep -v "gpu_busy\|launched\|one_at"
done; done
lap e2e
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
