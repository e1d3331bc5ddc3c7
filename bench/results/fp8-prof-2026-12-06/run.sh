#!/bin/bash
# run.sh - session 36's second call (binaries: build.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/fp8-prof-2026-12-06/run.sh)
# main's whole checks (run --verify P2 N2 bf16 on model-deep's shape, test_gpu_kernels,
# test_gpu_graphs), local's attention cases, kernel.sparse_attn of main and local
# alternating twice, FlashMLA, then ncu of main's fp8 and bf16 decode (source counters).
# ~5 minutes; SHORT=1 leaves out ncu.
. bench/device_common.sh
attention_cases local
attn_pipeline_checks .devrun/main
lap checks
attn_alternating main local
lap kernels
flashmla_anchor
lap flashmla
if [ -z "${SHORT:-}" ]; then
  ncu_attn fp8 li decode _Z9k_attn_wsILb1ELb1E
  ncu_attn bf16 li decode _Z9k_attn_wsILb0ELb0E
  lap ncu
fi
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl *.csv.gz 2>/dev/null; rm -f *.log *.json *.err *.csv.gz
