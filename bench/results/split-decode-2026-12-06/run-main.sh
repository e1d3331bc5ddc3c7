#!/bin/bash
# run-main.sh - session 36's fifth call (binaries: stage-main.sh; carry [".devrun"]):
# test_gpu_kernels whole (with the new f32 decode case of 32 splits), run --verify of
# model-long at P2 N2 over f32 rows, model-long's decode token (8 heads), then bench e2e
# --device cuda (within E2E_TIMEOUT, default 240 s; SHORT=1 leaves it out).
. bench/device_common.sh
timeout 150 .devrun/new/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1
echo "test_gpu_kernels rc=$? $(grep -c '^ok' "$OUT/test_kernels.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels.log" | cut -c1-200 | head -5
timeout 150 .devrun/new/sparsecp run --device cuda --pcp 2 --dcp 2 --model examples/model-long.json --verify > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long f32 rc=$? $(grep -E 'verify' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap checks
for i in 1 2; do
  SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.decode timeout 60 .devrun/new/gpu_bench_kernels --json > "$OUT/kernels-decode-$i.json" 2> "$OUT/kernels-decode-$i.err"
  echo "decode $i rc=$?"; show_attn "$OUT/kernels-decode-$i.json"
done
lap kernels
if [ -z "${SHORT:-}" ]; then
  timeout "${E2E_TIMEOUT:-240}" .devrun/new/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e.json" 2> "$OUT/bench-e2e.err"
  echo "e2e rc=$?"; show_e2e "$OUT/bench-e2e.json" 2>/dev/null; tail -3 "$OUT/bench-e2e.err"
  lap e2e
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.err
