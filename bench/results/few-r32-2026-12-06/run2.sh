#!/bin/bash
# run2.sh - the validation call of the merged tree (binaries: build2.sh; carry
# [".devrun"]). ~4 minutes: test_gpu_kernels and test_gpu_graphs (new); run --verify at
# P2 N2 over bf16 rows on model-long and on the default model (new); bench e2e over bf16
# rows, old then new (TTFT 32k and 128k, TPOT).
. bench/device_common.sh
timeout 200 .devrun/new/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | head
timeout 100 .devrun/new/test_gpu_graphs > "$OUT/test_graphs.log" 2>&1; echo "test_gpu_graphs rc=$?"; tail -2 "$OUT/test_graphs.log"
lap tests
for m in examples/model-long.json ""; do
  timeout 150 .devrun/new/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 ${m:+--model $m} --verify > "$OUT/verify.log" 2>&1
  echo "verify P2 N2 bf16 ${m:-default} rc=$? $(grep -E 'verify' "$OUT/verify.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
lap verify
for v in old new; do
  timeout 150 .devrun/$v/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-$v.json" 2> "$OUT/bench-e2e-$v.err"
  echo "e2e bf16 $v rc=$?"; show_e2e "$OUT/bench-e2e-$v.json"
done
lap e2e
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
