#!/bin/bash
# run.sh - session 36's fourth call (binaries: stage.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/split-decode-2026-12-06/run.sh)
# test_gpu_kernels' attention cases with each decode split, then model-long's decode token
# (8 heads, top-K 2048, f32 and bf16 rows: kernel.sparse_attn.decode) with each split in
# turn, twice. ~2 minutes.
. bench/device_common.sh
SETTINGS="SC_NONE=1 SPARSECP_SPLIT_DECODE=64 SPARSECP_SPLIT_DECODE=32 SPARSECP_FEW_SPLIT=64"
for e in $SETTINGS; do
  env $e timeout 150 .devrun/split/test_gpu_kernels > "$OUT/test_kernels-$e.log" 2>&1
  echo "test_gpu_kernels $e rc=$? $(grep -c '^ok' "$OUT/test_kernels-$e.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels-$e.log" | cut -c1-200 | head -5
done
lap checks
for i in 1 2; do for e in $SETTINGS; do
  f="$OUT/kernels-decode-$e-$i"
  env $e SC_BENCH_KERNELS_ONLY=kernel.sparse_attn.decode timeout 60 .devrun/split/gpu_bench_kernels --json > "$f.json" 2> "$f.err"
  echo "decode $e $i rc=$?"; show_attn "$f.json"
done; done
lap kernels
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
