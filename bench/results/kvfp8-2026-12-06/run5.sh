#!/bin/bash
# run5.sh - session 41's last call, on main (b0fa85d's code; sparsecp and
# gpu_bench_kernels in .devrun/new; ~3 minutes): issue 18's state in one run: bench e2e
# over every layout (f32, bf16, bf16 + fp8 keys, fp8_ds_mla, bf16 + TF32 gemms),
# kernel.indexer and PyTorch's indexer + top-K (bench/indexer_ref.py).
. bench/device_common.sh
B=.devrun/new
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 240 $B/sparsecp bench e2e --device cuda --json > "$OUT/e2e-all.json" 2> "$OUT/e2e-all.err"
echo "e2e every layout rc=$?"; show_e2e "$OUT/e2e-all.json" | grep -v "launched\|one_at"
python3 - "$OUT/e2e-all.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    p = r["params"]
    if p.get("gemm") == "tf32": print("  (tf32)", r["name"], p["context"], round(r["median"], 3), r.get("ratio_to_short_context", ""))
PY
lap e2e-all
SC_BENCH_KERNELS_ONLY=kernel.indexer timeout 100 $B/gpu_bench_kernels --json > "$OUT/kernels-indexer.json" 2> "$OUT/kernels-indexer.err"
echo "indexer rc=$?"; show_indexer "$OUT/kernels-indexer.json"
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-200 "$OUT/torch-anchor.jsonl" | head -12
lap indexer
cd "$OUT" && tar czf all5.tgz *.json *.err *.jsonl 2>/dev/null; rm -f *.json *.err *.jsonl
