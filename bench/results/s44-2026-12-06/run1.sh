#!/bin/bash
# run1.sh (session 44, first call): session 43's prepared validation and profile
# (few-2026-12-06/run5.sh, PART 1 2 3, binaries of build5.sh), then the SASS of the
# indexer's kernels (cuobjdump, which the build machine lacks) for reading offline; and
# the floors comparison below (.devrun/flo: main 3e62768 whose SPARSECP_INDEXER_FLOORS=S
# reaches every shape, built in the working tree; its rule still main's).
# Ran 18:52-18:59 UTC on one H100 -> out/c1 (the SASS not kept: 1.6 MB, rebuilt by
# cuobjdump from any build). The ncu step of run5.sh PART 3 timed cuBLAS's kernels (no
# kernel filter; run2.sh has one).
bash bench/results/few-2026-12-06/run5.sh
. bench/device_common.sh
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "cuobjdump: ${CUOBJ:-none}"
if [ -n "$CUOBJ" ]; then
  "$CUOBJ" -sass .devrun/new/gpu_bench_kernels 2>/dev/null | awk '
    /Function :/ { keep = ($0 ~ /k_idx_tc|k_idx_dense|k_topk_dense|k_rsel|k_idx_floor|k_topk_final/) }
    keep' | xz -T4 > "$OUT/sass-indexer.xz"
  ls -la "$OUT/sass-indexer.xz"
fi
# Sampled floors for the 64-head prompt (.devrun/flo: SPARSECP_INDEXER_FLOORS=S now
# reaches tokens of many products too; unset, the rule is main's): kernel.indexer with
# floors off (main's rule) against S = 16, 32, 64, twice; its indexer cases at S = 32.
for i in 1 2; do for S in 1 16 32 64; do
  SPARSECP_INDEXER_FLOORS=$S SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 60 .devrun/flo/gpu_bench_kernels --json > "$OUT/flo-$S-$i.json" 2> /dev/null
  echo "floors S=$S pass $i rc=$?"; show_indexer "$OUT/flo-$S-$i.json" | grep -E "'index_heads': 64"
done; done
SPARSECP_INDEXER_FLOORS=32 SC_GPU_CASES=indexer timeout 120 .devrun/flo/test_gpu_kernels > "$OUT/test-flo32.log" 2>&1
echo "indexer cases at S=32 rc=$? $(grep -c '^ok' "$OUT/test-flo32.log") ok"; grep -E "FAIL|not ok" "$OUT/test-flo32.log" | head -5
cd "$OUT" && tar czf flo.tgz flo-*.json test-flo32.log && rm -f flo-*.json test-flo32.log
