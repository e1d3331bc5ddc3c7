#!/bin/bash
# run.sh - session 38 (binaries: build.sh; carry [".devrun"]). ~4 minutes: r32's
# attention cases and their memcheck; the 8-head cases of main and r32 alternating three
# times; run --verify of model-long at P2 N2 over bf16 rows (r32); bench e2e over bf16
# rows (r32; main's of the state call of 08:40 UTC: TTFT 32k 77.6 ms).
. bench/device_common.sh
SC_GPU_CASES=attention timeout 100 .devrun/r32/test_gpu_kernels > "$OUT/test_attention_r32.log" 2>&1
echo "r32 attention rc=$? $(grep -c '^ok' "$OUT/test_attention_r32.log") ok"; grep -E "FAIL|not ok" "$OUT/test_attention_r32.log" | cut -c1-220 | head -8
attn_sanitize memcheck r32
lap checks
for i in 1 2 3; do for v in main r32; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/attn8-$v-$i.json" 2> "$OUT/attn8-$v-$i.err"
  echo "attn8 $v $i rc=$?"; show_attn "$OUT/attn8-$v-$i.json" bf16
done; done
lap attention
timeout 200 .devrun/r32/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --model examples/model-long.json --verify > "$OUT/verify-long-r32.log" 2>&1
echo "verify P2 N2 model-long bf16 r32 rc=$? $(grep -E 'verify' "$OUT/verify-long-r32.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
timeout 200 .devrun/r32/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-r32.json" 2> "$OUT/bench-e2e-r32.err"
echo "e2e bf16 r32 rc=$?"; show_e2e "$OUT/bench-e2e-r32.json"
lap e2e
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
