#!/bin/bash
# run7.sh (session 56): branch wip/readback on the GPU (build7.sh's .devrun/z, ~2.5 min).
# Between two decode steps the compute stream ran three copies and a memset (rank 0's
# tokens and margins, the notify's error flag and its reset) beside the next step's
# upload: the device's gap between steps, 22.8 us at one rank and 46-53 us at each rank
# of P4 N4 (session 55). z reads them by kernels. First its notify and deferred-read
# cases (test_gpu_kernels, SC_GPU_CASES=notify) and run --verify at P2 N2; then the
# default model's decode TPOT and device gaps (4 requests of 64 + 64 tokens 500 ms apart)
# at one rank over NCCL and at P4 N4 over ipc under MPS, SPARSECP_CUDA_READBACK=copy
# (main's copies) and the kernels alternating, three rounds. Merge only for a clear gain.
. bench/device_common.sh
SC_GPU_CASES=notify timeout 120 .devrun/z/test_gpu_kernels > "$OUT/z-notify.log" 2>&1
echo "z notify cases rc=$? $(grep -c '^ok' "$OUT/z-notify.log") ok"; grep -E "FAIL|not ok" "$OUT/z-notify.log" | head
BIN=.devrun/z verify_p2n2
requests 4 500 "$OUT/req4.jsonl"
readback_ab 3 "one p4" # (the loop written out here when c1 ran it: the same runs)
lap readback
cd "$OUT" && tar czf readback.tgz *.json *.jsonl *.err *.log 2>/dev/null; rm -f *.json *.jsonl *.err *.log
