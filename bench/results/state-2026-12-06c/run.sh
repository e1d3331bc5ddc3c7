#!/bin/bash
# run.sh - issue 18's state in one call after the floors (binaries: build.sh; carry
# [".devrun"]; ~3 minutes): bench e2e over bf16 rows (TTFT, TPOT ratios), kernel.indexer
# twice and PyTorch's indexer + top-K (bench/indexer_ref.py) in the same call; then for
# the next session, where a 32k prompt's indexer spends its time now: one full pass
# (k_idx_tc, the second of an op's three) and one sort (k_topk_final) with source
# counters (f32 keys: the first format of kernel.indexer.prompt).
. bench/device_common.sh
timeout 100 .devrun/main/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/bench-e2e-bf16.json" 2> "$OUT/bench-e2e-bf16.err"
echo "e2e bf16 rc=$?"; show_e2e "$OUT/bench-e2e-bf16.json" | grep -v "launched\|one_at"
lap e2e
indexer_alternating main
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-200 "$OUT/torch-anchor.jsonl" | head -12
lap indexer
for k in "k_idx_tc 4" "k_topk_final 1"; do
  set -- $k
  SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt timeout 100 ncu --clock-control none --set full --import-source yes \
    -k "regex:$1" --launch-skip $2 --launch-count 1 -o "$OUT/ncu-$1" .devrun/main/gpu_bench_kernels --json > "$OUT/ncu-$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  ncu -i "$OUT/ncu-$1.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-$1.csv" 2>&1
  ncu -i "$OUT/ncu-$1.ncu-rep" --page details > "$OUT/ncu-det-$1.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy" "$OUT/ncu-det-$1.txt" | head -5
  python3 bench/ncu_lines.py "$OUT/ncu-src-$1.csv" 16 | cut -c1-200
  gzip "$OUT/ncu-src-$1.csv"; rm -f "$OUT/ncu-$1.ncu-rep"
done
lap ncu
cd "$OUT" && tar czf all.tgz *.txt *.json *.err *.jsonl *.csv.gz 2>/dev/null; rm -f *.txt *.json *.err *.jsonl *.csv.gz
