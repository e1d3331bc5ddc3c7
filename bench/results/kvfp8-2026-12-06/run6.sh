#!/bin/bash
# run6.sh - session 41's sixth call (~1 minute): the few-heads kernel's fp8 dequantization
# with four rows' loads issued before converting them (.devrun/batch) against main's
# (.devrun/new, b0fa85d's code): test_gpu_kernels' attention cases (batch), then
# kernel.sparse_attn of model-long's shapes, alternating twice.
. bench/device_common.sh
SC_GPU_CASES=attention timeout 120 .devrun/batch/test_gpu_kernels > "$OUT/test_attn.log" 2>&1
echo "test_gpu_kernels attention rc=$? $(grep -c '^ok' "$OUT/test_attn.log") ok"; grep -E "FAIL" "$OUT/test_attn.log" | head -5
grep -E "attn fmt=3 tok=[0-9]+ heads=(8|16|5|12) " "$OUT/test_attn.log" | cut -c1-150 | head -8
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
cd "$OUT" && tar czf all6.tgz *.log *.json 2>/dev/null; rm -f *.log *.json
