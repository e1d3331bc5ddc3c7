#!/bin/bash
# run1.sh - session 42's first call (~3 minutes), binaries in .devrun/new (main + the
# indexer's merge by block, SPARSECP_INDEXER_MERGE picks it) and .devrun/batch
# (wip/few-fp8-batch, session 41's prepared change):
#  1. the few-heads kernel's fp8 dequantization with four rows' loads issued first
#     (batch) against main's (new): its attention cases, then kernel.sparse_attn of
#     model-long's shapes, alternating twice (session 41's run6.sh);
#  2. the 64-head decode shape's indexer, its chunks' survivors selected by the radix
#     select (main's) or by one block a token, alternating twice;
#  3. ncu durations of every kernel of that op, both ways, bf16 and fp8_index keys;
#  4. the indexer cases of test_gpu_kernels (new).
. bench/device_common.sh
if has 1; then
  SC_GPU_CASES=attention timeout 120 .devrun/batch/test_gpu_kernels > "$OUT/test_attn.log" 2>&1
  echo "batch attention rc=$? $(grep -c '^ok' "$OUT/test_attn.log") ok"; grep -E "FAIL" "$OUT/test_attn.log" | head -5
  for r in 1 2; do for v in new batch; do
    SC_BENCH_KERNELS_ONLY=kernel.sparse_attn timeout 60 .devrun/$v/gpu_bench_kernels --json > "$OUT/attn-$v-$r.json" 2> /dev/null
    python3 - "$OUT/attn-$v-$r.json" "$v $r" <<'PY'
import json, sys
for x in json.load(open(sys.argv[1]))["results"]:
    p = x["params"]
    if p.get("heads") == 8 and p["kv"] != "f32":
        print(" ", sys.argv[2], x["name"], p["tokens"], p["kv"], "time_us", x["time_us"])
PY
  done; done
  lap attn
fi
if has 2; then
  for r in 1 2; do for m in radix block; do
    SPARSECP_INDEXER_MERGE=$m SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 100 \
      .devrun/new/gpu_bench_kernels --json > "$OUT/idx-$m-$r.json" 2> "$OUT/idx-$m-$r.err"
    echo "indexer merge=$m $r rc=$?"; show_indexer "$OUT/idx-$m-$r.json"
  done; done
  lap indexer
fi
if has 3; then
  for m in radix block; do
    SPARSECP_INDEXER_MERGE=$m SC_BENCH_KERNELS_ONLY=kernel.indexer SC_BENCH_INDEXER_TOKENS=128 timeout 200 \
      ncu --clock-control none -k regex:'k_idx|k_rsel|k_topk' --launch-skip 30 --launch-count 30 --section SpeedOfLight \
      .devrun/new/gpu_bench_kernels --json > "$OUT/ncu-$m.txt" 2>&1
    echo "ncu merge=$m rc=$?"
    python3 - "$OUT/ncu-$m.txt" <<'PY'
import re, sys
name = None
for l in open(sys.argv[1]):
    m = re.match(r"^  (?:void )?(\w+)(<.*?>)?\(.*\) \(([\d, ]+)\)x\(([\d, ]+)\)", l)
    if m: name = m.group(1) + (m.group(2) or "")[:40] + " grid(" + m.group(3) + ")"
    m = re.search(r"Duration\s+(\S+)\s+([\d.,]+)", l)
    if m and name: print(f"    {name:70s} {m.group(2):>10s} {m.group(1)}"); name = None
PY
  done
  lap ncu
fi
if has 4; then
  SC_GPU_CASES=indexer timeout 200 .devrun/new/test_gpu_kernels > "$OUT/test_indexer.log" 2>&1
  echo "test_gpu_kernels indexer rc=$? $(grep -c '^ok' "$OUT/test_indexer.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer.log" | cut -c1-200 | head -20
  lap tests
fi
cd "$OUT" && tar czf all1.tgz *.log *.json *.txt *.err 2>/dev/null; rm -f *.log *.json *.err ncu-*.txt
