#!/bin/bash
# run.sh - the fp8 decode's next call (binaries: build.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/fp8-next-2026-12-06/run.sh)
# The attention cases of each patched variant, memcheck and racecheck of both's (the
# clusters' release changed), all of test_gpu_kernels of both, then kernel.sparse_attn
# of main / arrive / ahead / regs / both alternating twice, and FlashMLA. ~4 minutes;
# SHORT=1 leaves out memcheck, racecheck and the whole test_gpu_kernels (~2 minutes).
# Merge what wins, with its attention cases passing (and, for arrive, racecheck clean).
. bench/device_common.sh
attention_cases arrive ahead regs both
if [ -z "${SHORT:-}" ]; then
  attn_sanitize memcheck both
  attn_sanitize racecheck both
  timeout 150 .devrun/both/test_gpu_kernels > "$OUT/test_kernels-both.log" 2>&1
  echo "test_gpu_kernels both rc=$? $(grep -c '^ok' "$OUT/test_kernels-both.log") ok"; grep -E "FAIL|not ok" "$OUT/test_kernels-both.log" | head -5
fi
lap checks
attn_alternating main arrive ahead regs both
lap kernels
flashmla_anchor
lap flashmla
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
