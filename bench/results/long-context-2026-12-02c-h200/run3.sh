#!/bin/bash
# Call 3: room 3K a token, one mask test per key for a prompt's tokens, two blocks an SM
# where they fit; the indexer's GPU cases; kernel.indexer (default and SC_IDX_GROUP caps
# of this experiment binary); ncu source counters of the 32k prompt; bench e2e --device cuda.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -f .devrun/lib/libopenblas.so.0.xz ] && xz -d .devrun/lib/libopenblas.so.0.xz
. tests/gpu/cuda_env.sh "$PWD/.devrun/lib" > /dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt"; date -u >> "$OUT/gpu.txt"
SC_GPU_CASES=indexer timeout 200 .devrun/test_gpu_kernels > "$OUT/test_kernels.log" 2>&1; echo "test_gpu_kernels indexer rc=$? ok=$(grep -c '^ok' "$OUT/test_kernels.log")"
grep -E "FAIL|error" "$OUT/test_kernels.log" | head -8
for g in def 1 2 8; do
  if [ $g = def ]; then unset SC_IDX_GROUP; else export SC_IDX_GROUP=$g; fi
  SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 .devrun/gpu_bench_kernels --json > "$OUT/kernels-indexer-g$g.json" 2>/dev/null; echo "== g$g rc=$?"
  python3 - "$OUT/kernels-indexer-g$g.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if r["name"] == "kernel.indexer": print(r["name"], {k: p[k] for k in ("phase", "tokens", "index_heads", "keys") if k in p}, round(r["median"], 1), r["unit"])
PY
done
unset SC_IDX_GROUP
SC_IDX_GROUP=16 SC_TMP_PREFILL_ONLY=1 SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 200 ncu --clock-control none --kernel-name regex:k_idx_tc --launch-skip 1 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section SchedulerStats --page source --csv --print-source cuda \
  .devrun/exp/bench_prefill > $OUT/ncu-src.csv 2>$OUT/ncu-src.err; echo "ncu rc=$?"
python3 - "$OUT/ncu-src.csv" <<'PY' > "$OUT/ncu-top.txt" 2>&1
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr = None
for i, r in enumerate(rows):
    if "Source" in r and any("Warp Stall Sampling" in c for c in r): hdr = i; break
if hdr is None:
    print("no header; first lines:"); [print(r[:8]) for r in rows[:15]]; sys.exit()
h = rows[hdr]; print(h)
si = h.index("Source"); cols = [j for j, c in enumerate(h) if "Warp Stall Sampling (All" in c or c.startswith("Instructions Executed")]
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
data = [r for r in rows[hdr + 1:] if len(r) == len(h)]
for c in cols:
    print("== top by", h[c], "total", sum(num(r[c]) for r in data))
    for r in sorted(data, key=lambda r: -num(r[c]))[:25]:
        print(int(num(r[c])), "|", r[0] if h[0] != "Source" else "", "|", r[si].strip()[:110])
PY
head -70 "$OUT/ncu-top.txt"
timeout 300 .devrun/sparsecp bench e2e --device cuda --json > "$OUT/bench-e2e-cuda.json" 2> "$OUT/bench-e2e-cuda.err"; echo "e2e rc=$?"
grep -E "ttft|tpot" "$OUT/bench-e2e-cuda.err" | grep "round 1" | head -20
cd "$OUT" && tar czf all.tgz *.log *.json *.txt *.err
