#!/bin/bash
# run.sh - session 36's third call (binaries: stage.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/ws4-2026-12-06/run.sh)
# k_attn_ws4's attention cases (and under racecheck and memcheck unless SHORT=1), then
# kernel.sparse_attn with SPARSECP_ATTN_WS4 0 and 1 alternating twice, and FlashMLA.
. bench/device_common.sh
SPARSECP_ATTN_WS4=1 SC_GPU_CASES=attention timeout 60 .devrun/ws4/test_gpu_kernels > "$OUT/test_attention-ws4.log" 2>&1
echo "attention cases ws4 rc=$? $(grep -c '^ok' "$OUT/test_attention-ws4.log") ok"; grep -E "FAIL|not ok" "$OUT/test_attention-ws4.log" | cut -c1-200 | head -5
lap checks
attn_env_alternating SPARSECP_ATTN_WS4 "0 1" ws4
lap kernels
flashmla_anchor
lap flashmla
if [ -z "${SHORT:-}" ]; then
  SPARSECP_ATTN_WS4=1 attn_sanitize racecheck ws4
  SPARSECP_ATTN_WS4=1 attn_sanitize memcheck ws4
  lap sanitizers
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
