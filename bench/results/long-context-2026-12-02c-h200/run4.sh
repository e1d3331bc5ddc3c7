#!/bin/bash
# Call 4: where a scoring block's cycles go (an experiment build with clock64 counters
# around the phases, TC_PROF, not in the tree), on the 32k prompt and the other shapes.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
SC_TMP_PREFILL_ONLY=1 SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 .devrun/exp/bench_prof > "$OUT/prof-32k.txt" 2>&1; echo "rc=$?"
grep TC_PROF "$OUT/prof-32k.txt" | tail -2; grep "kernel.indexer" "$OUT/prof-32k.txt" | cut -c1-200
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 .devrun/exp/bench_prof > "$OUT/prof-all.txt" 2>&1; echo "rc=$?"
grep -B1 "^kernel.indexer" "$OUT/prof-all.txt" | cut -c1-250
