#!/bin/bash
# run3.sh - after run1 (the floors: the 32k prompt's indexer 14.1 -> 12.4 ms, less than
# the appends they save suggested): where the 32k prompt's indexer op spends its time,
# with the floors (1) and without (0): each kernel's duration (ncu, one metric), then
# one launch of the full pass (k_idx_tc) of each with source counters. run --verify of
# model-long over bf16 rows with two 8k prompts (run1's lacked --num-blocks). Then
# fbulk's 8-head attention cases against main, alternating three times (run2's timing
# part; its checks wait for a gain). ~6 minutes.
. bench/device_common.sh
B=.devrun/floors
for i in 0 1; do printf '{"prompt_len": 8192, "max_tokens": 16, "arrive_ms": %d, "seed": %d}\n' $((i * 10)) $i; done > "$OUT/req8k.jsonl"
timeout 200 $B/sparsecp run --device cuda --pcp 2 --dcp 2 --kv-format bf16 --verify --model examples/model-long.json --token-budget 16384 --max-model-len 8320 --num-blocks 1100 --requests "$OUT/req8k.jsonl" > "$OUT/verify-long.log" 2>&1
echo "verify P2 N2 model-long bf16 8k rc=$? $(grep -E 'verify|error' "$OUT/verify-long.log" | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
lap verify
for f in 1 0; do
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv $B/gpu_bench_kernels --json > "$OUT/ncu-times-f$f.csv" 2> "$OUT/ncu-times-f$f.err"
  echo "ncu times floors=$f rc=$?"
  python3 - "$OUT/ncu-times-f$f.csv" <<'PY'
import csv, sys, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[12] == "gpu__time_duration.sum"]
seq = [(r[4].split("(")[0], float(r[14].replace(",", "")), r[13], r[8]) for r in rows]
print("  kernels", len(seq), "first 12:")
for k, v, u, g in seq[:12]: print("   ", k[:60], g, v, u)
by = {}
for k, v, u, g in seq: by.setdefault((k, g), []).append(v)
for (k, g), vs in by.items(): print("  ", k[:60], g, "n", len(vs), "median", statistics.median(vs))
PY
done
lap times
for f in 1 0; do
  skip=$([ $f = 1 ] && echo 4 || echo 1)
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt timeout 150 ncu --clock-control none --set full --import-source yes \
    -k regex:k_idx_tc --launch-skip $skip --launch-count 1 -o "$OUT/ncu-main-f$f" $B/gpu_bench_kernels --json > "$OUT/ncu-main-f$f.txt" 2>&1
  echo "ncu main floors=$f rc=$?"
  ncu -i "$OUT/ncu-main-f$f.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/ncu-src-f$f.csv" 2>&1
  ncu -i "$OUT/ncu-main-f$f.ncu-rep" --page details > "$OUT/ncu-det-f$f.txt" 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy" "$OUT/ncu-det-f$f.txt" | head -8
  python3 bench/ncu_lines.py "$OUT/ncu-src-f$f.csv" 14 | cut -c1-220
  gzip "$OUT/ncu-src-f$f.csv"
done
lap ncu
attn8_alternating 3 main fbulk
lap attention
cd "$OUT" && tar czf all.tgz *.log *.json *.err *.txt *.csv.gz 2>/dev/null; rm -f *.log *.json *.err *.txt *.csv.gz
