#!/bin/bash
# run.sh - session 38, issue 18 (binaries: build.sh; with carry [".devrun"]:
# export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~3 minutes.
. bench/device_common.sh
for f in $(find .devrun -name '*.xz'); do xz -d "$f"; done; chmod +x .devrun/*/* 2>/dev/null
ipc_test_mps .devrun/main/test_gpu_ipc
lap test_gpu_ipc
SC_GPU_CASES=indexer timeout 200 .devrun/idx3/test_gpu_kernels > "$OUT/test_indexer_idx3.log" 2>&1
echo "idx3 indexer cases rc=$? $(grep -c '^ok' "$OUT/test_indexer_idx3.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer_idx3.log" | cut -c1-200 | head
SC_GPU_CASES=indexer timeout 300 compute-sanitizer --tool memcheck .devrun/idx3/test_gpu_kernels > "$OUT/memcheck-indexer-idx3.log" 2>&1
echo "memcheck indexer idx3 rc=$? $(grep -h 'ERROR SUMMARY' "$OUT/memcheck-indexer-idx3.log")"
lap checks
indexer_alternating "main idx3"
lap indexer
timeout 120 /opt/torch/.venv/bin/python3 bench/indexer_ref.py > "$OUT/torch-anchor.jsonl" 2>&1; echo "anchor rc=$?"
cut -c1-220 "$OUT/torch-anchor.jsonl" | head -12
lap anchor
which nsys ncu nvidia-smi 2>&1 | head
cd "$OUT" && tar czf all.tgz *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err *.jsonl
