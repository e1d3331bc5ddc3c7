#!/bin/bash
# run.sh - the next call, prepared in session 38 (binaries: build.sh; with carry
# [".devrun"]: export LD_LIBRARY_PATH=$PWD/.devrun/lib; bash run.sh). ~4 minutes:
# fbulk's attention cases, memcheck, racecheck of the batch-invariance cases (the 8-head
# kernel's new barrier use), then the 8-head cases of main and fbulk alternating three
# times. Merge fbulk for a clear gain with every check clean (then drop the macro and the
# cp.async path of the few-heads kernel, and run bench e2e --kv-format bf16 against the
# tree before in one call).
. bench/device_common.sh
attention_cases fbulk
attn_sanitize memcheck fbulk
SC_GPU_CASES=attention_batch timeout 200 compute-sanitizer --tool racecheck .devrun/fbulk/test_gpu_kernels > "$OUT/racecheck-fbulk.log" 2>&1
echo "racecheck batch fbulk rc=$? $(grep -h 'RACECHECK SUMMARY' "$OUT/racecheck-fbulk.log") few: $(grep -c k_attn_few "$OUT/racecheck-fbulk.log")"
lap checks
attn8_alternating 3 main fbulk
lap attention
cd "$OUT" && tar czf all.tgz *.log *.json *.err 2>/dev/null; rm -f *.log *.json *.err
