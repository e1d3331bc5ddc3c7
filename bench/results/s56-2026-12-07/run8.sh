#!/bin/bash
# run8.sh (session 56): wip/readback after c1 (its kernels loaded at the context's
# creation, b954d83; .devrun/z rebuilt by build7.sh): the cases c1 failed, case_notify
# (the first notify queued behind a running step waited for it: lazy loading) and the
# two device-fault cases, run as a whole run runs them (c1's SC_GPU_CASES=notify ran
# the second without the first, which faults the context); then one rank's TPOT and
# device gap, copies and kernels alternating, three rounds (~1.5 min).
. bench/device_common.sh
SC_GPU_CASES=case_notify timeout 60 .devrun/z/test_gpu_kernels > "$OUT/z-notify.log" 2>&1
echo "z case_notify rc=$? $(grep -c '^ok' "$OUT/z-notify.log") ok"; grep -E "FAIL|not ok" "$OUT/z-notify.log" | head
SC_GPU_CASES=device_fault timeout 60 .devrun/z/test_gpu_kernels > "$OUT/z-fault.log" 2>&1
echo "z device_fault rc=$? $(grep -c '^ok' "$OUT/z-fault.log") ok"; grep -E "FAIL|not ok" "$OUT/z-fault.log" | head
requests 4 500 "$OUT/req4.jsonl"
readback_ab 3 one
lap readback
cd "$OUT" && tar czf readback2.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
