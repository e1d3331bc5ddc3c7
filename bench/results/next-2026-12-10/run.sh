#!/bin/bash
# run.sh - session 43's first call (~3 minutes; build.sh first): where the indexer's dense
# path spends the 64-head decode shape over fp8_index keys (session 42: ~140 us of
# scores at ~2 TB/s, 25 us of select, bench/long-context.md). kernel.indexer of main
# (prof) and of rings of three tiles (s3) alternating twice, s3's indexer cases, then
# ncu with source counters of one launch each of k_idx_dense<true> and k_topk_dense
# (main's; device_common.sh's ncu_src), printed by bench/ncu_lines.py.
. bench/device_common.sh
for r in 1 2; do for v in prof s3; do
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$v-$r.json" 2> "$OUT/idx-$v-$r.err"
  echo "indexer $v $r"; show_indexer "$OUT/idx-$v-$r.json"
done; done
SC_GPU_CASES=indexer timeout 120 .devrun/s3/test_gpu_kernels > "$OUT/test_indexer_s3.log" 2>&1
echo "s3 test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer_s3.log") ok"
export SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128
ncu_src dense-fp8 prof '_Z11k_idx_denseILb1EE'
ncu_src select prof '_Z12k_topk_dense'
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.csv.gz *.json *.log 2>/dev/null; rm -f ncu-*.txt *.json *.log
