#!/bin/bash
# run.sh - session 38 (binaries: build.sh; carry [".devrun"]). ~1 minute: the 8-head
# sparse attention cases (model-long's decode token and 4096-token prefill chunk) of
# main, p41 and p0 in turn, three times.
. bench/device_common.sh
for i in 1 2 3; do for v in main p41 p0; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/attn8-$v-$i.json" 2> "$OUT/attn8-$v-$i.err"
  echo "attn8 $v $i rc=$?"; show_attn "$OUT/attn8-$v-$i.json" bf16
done; done
lap attention
cd "$OUT" && tar czf all.tgz *.json *.err 2>/dev/null; rm -f *.json *.err
