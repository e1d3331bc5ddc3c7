#!/bin/bash
# run.sh - the next call for issues 19 and 18, prepared in session 36, run in session 37
# (call1/; bench/kernels-cuda.md, bench/long-context.md) (binaries: build.sh; with carry [".devrun"]:
#   export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash bench/results/next-2026-12-06/run.sh)
# The attention cases of halves, l2, hl2 and b2, racecheck and memcheck of halves' (its
# barriers changed), kernel.sparse_attn of main / halves / l2 / hl2 / b2 alternating
# twice, FlashMLA; then idxl2's indexer cases and kernel.indexer of main and idxl2
# alternating twice, and main's bench e2e over f32 rows (issue 18's TPOT ratio at 128k).
# ~6.5 minutes (one call's limit is 10); SHORT=1 leaves out the sanitizers (~5.5). Merge
# what wins once its cases pass (halves: racecheck clean; its branch's
# tests/attn_ws_protocol.py models the two half barriers).
. bench/device_common.sh
attention_cases halves l2 hl2 b2
if [ -z "${SHORT:-}" ]; then
  attn_sanitize racecheck halves
  attn_sanitize memcheck halves
fi
lap checks
attn_alternating main halves l2 hl2 b2
lap kernels
flashmla_anchor
lap flashmla
SC_GPU_CASES=indexer timeout 100 .devrun/idxl2/test_gpu_kernels > "$OUT/test_indexer-idxl2.log" 2>&1
echo "idxl2 indexer cases rc=$? $(grep -c '^ok' "$OUT/test_indexer-idxl2.log") ok"; grep -E "FAIL|not ok" "$OUT/test_indexer-idxl2.log" | cut -c1-200 | head -5
indexer_alternating "main idxl2"
lap indexer
timeout 150 .devrun/main/sparsecp bench e2e --device cuda --kv-format f32 --json > "$OUT/bench-e2e-f32.json" 2> "$OUT/bench-e2e-f32.err"
echo "e2e f32 rc=$?"; show_e2e "$OUT/bench-e2e-f32.json"
lap e2e
cd "$OUT" && tar czf all.tgz *.txt *.log *.json *.err *.jsonl 2>/dev/null; rm -f *.log *.json *.err
