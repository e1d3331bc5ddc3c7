#!/bin/bash
# run4.sh - session 42's last call (~2 minutes): the dense path's select with the words'
# loads ahead of the positions' and one histogram atomic a bin a warp (.devrun/sel)
# against the one of call 3 (.devrun/new), kernel.indexer's 64-head decode shape
# alternating twice, PyTorch's indexer in the same call, then sel's indexer cases.
. bench/device_common.sh
for r in 1 2; do for v in new sel; do
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 60 \
    .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$v-$r.json" 2> "$OUT/idx-$v-$r.err"
  echo "indexer $v $r rc=$?"; show_indexer "$OUT/idx-$v-$r.json"
done; done
timeout 60 /opt/torch/.venv/bin/python3 bench/indexer_ref.py 2>&1 | grep -E "decode 128x" | cut -c1-120
lap indexer
SC_GPU_CASES=indexer timeout 120 .devrun/sel/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
echo "sel test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer.log" | cut -c1-200 | head -10
lap tests
cd "$OUT" && tar czf all4.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
