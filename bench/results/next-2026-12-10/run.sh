#!/bin/bash
# run.sh - session 43's first call (~3 minutes; build.sh first): where the indexer's dense
# path spends the 64-head decode shape over fp8_index keys (session 42: ~140 us of
# scores at ~2 TB/s, 25 us of select, bench/long-context.md). kernel.indexer of main
# (prof) and of rings of three tiles (s3) alternating twice, s3's indexer cases, then
# ncu with source counters of one launch each of k_idx_dense<true> and k_topk_dense
# (main's), printed by bench/ncu_lines.py (lines and instructions).
. bench/device_common.sh
ncu_idx() { # NAME MANGLED
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 150 \
    ncu --clock-control none --set full --import-source yes --kernel-name-base mangled \
    -k "regex:$2" --launch-skip 4 --launch-count 1 -o "$OUT/ncu-$1" \
    .devrun/prof/gpu_bench_kernels --json > "$OUT/ncu-$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  ncu -i "$OUT/ncu-$1.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-$1.csv" 2>&1
  ncu -i "$OUT/ncu-$1.ncu-rep" --page details > "$OUT/ncu-det-$1.txt" 2>&1
  grep -E "Duration|Eligible Warps|Warp Cycles Per Issued|Issued Warp|L2 Hit|Mem Busy|Max Bandwidth|DRAM Throughput" "$OUT/ncu-det-$1.txt" | head -10 | cut -c1-120
  gzip -f "$OUT/ncu-src-$1.csv"; rm -f "$OUT/ncu-$1.ncu-rep"
  python3 bench/ncu_lines.py "$OUT/ncu-src-$1.csv.gz" 14 | cut -c1-160
  python3 bench/ncu_lines.py --sass "$OUT/ncu-src-$1.csv.gz" 8 | cut -c1-160
}
for r in 1 2; do for v in prof s3; do
  SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/idx-$v-$r.json" 2> "$OUT/idx-$v-$r.err"
  echo "indexer $v $r"; show_indexer "$OUT/idx-$v-$r.json"
done; done
SC_GPU_CASES=indexer timeout 120 .devrun/s3/test_gpu_kernels > "$OUT/test_indexer_s3.log" 2>&1
echo "s3 test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer_s3.log") ok"
ncu_idx dense-fp8 '_Z11k_idx_denseILb1EE'
ncu_idx select '_Z12k_topk_dense'
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.csv.gz *.json *.log 2>/dev/null; rm -f ncu-*.txt *.json *.log
