#!/bin/bash
# run6.sh - the merged tree's sample stride (binaries as run5.sh's; ~4 minutes): the 32k
# prompt's indexer (kernel.indexer.prompt) with SPARSECP_INDEXER_FLOORS=0 (off), 16, 32
# (the rule's at K = 2048), 64 and 128, alternating twice; each kernel's duration (ncu)
# at 32 and 64; bench e2e over bf16 rows at 32 and 64.
. bench/device_common.sh
for i in 1 2; do for f in 0 16 32 64 128; do
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt timeout 100 .devrun/gpu_bench_kernels --json > "$OUT/prompt-$f-$i.json" 2> "$OUT/prompt-$f-$i.err"
  echo "prompt floors=$f $i rc=$?"; show_indexer "$OUT/prompt-$f-$i.json"
done; done
lap prompt
for f in 32 64; do
  SPARSECP_INDEXER_FLOORS=$f SC_BENCH_KERNELS_ONLY=kernel.indexer.prompt timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv .devrun/gpu_bench_kernels --json > "$OUT/ncu-times-$f.csv" 2> "$OUT/ncu-times-$f.err"
  echo "ncu times floors=$f rc=$?"
  python3 - "$OUT/ncu-times-$f.csv" <<'PY'
import csv, sys, statistics
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14 and r[12] == "gpu__time_duration.sum"]
seq = [(r[4].split("(")[0][:40], float(r[14].replace(",", "")) / 1e3) for r in rows if "nvjet" not in r[4]]
print("  kernels (us), one op of each format, the 2nd:", [(k, round(v)) for k, v in seq[5:10]], [(k, round(v)) for k, v in seq[-5:]])
PY
done
lap ncu
for f in 32 64; do
  SPARSECP_INDEXER_FLOORS=$f timeout 100 .devrun/sparsecp bench e2e --device cuda --kv-format bf16 --json > "$OUT/e2e-$f.json" 2> "$OUT/e2e-$f.err"
  echo "e2e bf16 floors=$f rc=$?"; show_e2e "$OUT/e2e-$f.json" | grep -v "gpu_busy\|launched\|one_at"
done
lap e2e
cd "$OUT" && tar czf all.tgz *.json *.err *.csv 2>/dev/null; rm -f *.json *.err *.csv
